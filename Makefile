# Thin wrapper over CMake: `make demo` runs the main job, `make test` the test suite.
# Both install the Debian packages the project needs first (scripts/install-deps.sh).
# `make build` builds what users run (compiler, runtime, drivers, examples); `make test`
# also builds the tests and the benchmarks (the target colossal_tests), then runs ctest.
BUILD ?= build
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 30
CMAKE_FLAGS ?=

.PHONY: deps build demo test asan fuzz clean

deps:
	@scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	scripts/demo.sh $(BUILD)

test: build
	cmake --build $(BUILD) -j$(JOBS) --target colossal_tests
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer.
asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCOLOSSAL_SANITIZE=ON -DCOLOSSAL_CUDA=OFF >/dev/null
	cmake --build build-asan -j$(JOBS) --target all colossal_tests
	ctest --test-dir build-asan --output-on-failure -j$(JOBS)

# libFuzzer targets (tests/fuzz: every parser of outside data), each run for FUZZ_SECONDS/2,
# one a core.
fuzz: deps
	CC=clang-19 cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DCOLOSSAL_FUZZ=ON -DCOLOSSAL_SANITIZE=ON \
	  -DCOLOSSAL_CUDA=OFF -DCOLOSSAL_FUZZ_SECONDS=$(FUZZ_SECONDS) >/dev/null
	cmake --build build-fuzz -j$(JOBS) --target fuzzers
	ctest --test-dir build-fuzz -R '^fuzz_' --output-on-failure -j$(JOBS)

clean:
	rm -rf build build-asan build-fuzz
