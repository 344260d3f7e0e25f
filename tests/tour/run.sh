#!/usr/bin/env bash
# run.sh — the README's tour as a new user runs it: every command of the
# fenced ```sh blocks of its section "A 5-minute tour", verbatim (lines
# joined where they end in a backslash), in a fresh directory that holds the
# repository's files (links to the sources and to BUILD as build/) and an
# empty out/. `make build`, the first command, is the build this test runs
# in, so it is checked (the tree is built) rather than run again. Then:
# the section's ```cmake block is the installed project's CMakeLists.txt
# (less its comments), the commands made what the tour says they make, and
# the model learned (the validation loss fell).
# usage: tests/tour/run.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
work=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work"

# the section, then its blocks: sh commands and the cmake file
awk '/^## A 5-minute tour/ {on = 1; next} /^## / {on = 0} on' "$src/README.md" >"$work/tour.md"
[ -s "$work/tour.md" ] || fail "README.md has no section '## A 5-minute tour'"
awk -v want="$work/commands.sh" -v cm="$work/tour.cmake" '
    /^ *```sh *$/ {block = "sh"; next}
    /^ *```cmake *$/ {block = "cmake"; next}
    /^ *```/ {block = ""; next}
    block == "sh" {sub(/^ +/, ""); print >> want}
    block == "cmake" {sub(/^   /, ""); print >> cm}' "$work/tour.md"
# join continuation lines: a command per line
awk '{ if (sub(/\\$/, "")) { acc = acc $0 } else { print acc $0; acc = "" } }' "$work/commands.sh" \
    | sed -e 's/^ *//' >"$work/commands"
grep -q . "$work/commands" || fail "no commands in the tour"
head -1 "$work/commands" | grep -q '^make build' || fail "the tour does not start with make build"
[ -x "$build/compiler/colossal-compile" ] || fail "make build did not build the compiler"

# a fresh directory: the repository's files, the build as build/, nothing else
run=$work/run
mkdir -p "$run"
for f in README.md docs examples tools include; do ln -s "$src/$f" "$run/$f"; done
ln -s "$build" "$run/build"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=1 NO_COLOR=1
n=0
tail -n +2 "$work/commands" | while IFS= read -r cmd; do
    n=$((n + 1))
    echo "== $n: $cmd"
    (cd "$run" && bash -euo pipefail -c "$cmd") >"$work/step$n.out" 2>&1 || { cat "$work/step$n.out"; fail "tour command $n: $cmd"; }
    tail -n 4 "$work/step$n.out"
done

installed=$run/out/colossal/share/colossal/examples/gpt2/CMakeLists.txt
[ -f "$installed" ] || fail "the install has no $installed"
grep -v '^#' "$installed" | diff - "$work/tour.cmake" || fail "the README's CMake file is not the installed one"
[ -f "$run/out/gpt2-124m/gpt2.report.md" ] || fail "step 2 wrote no report"
[ -x "$run/out/mytrainer/build/train" ] || fail "step 3 built no program"
log=$run/out/train.csv
[ -f "$log" ] || fail "step 4 wrote no log"
first=$(awk -F, '$1 == "val" {print $3; exit}' "$log")
last=$(awk -F, '$1 == "val" {v = $3} END {print v}' "$log")
awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 0 && b < a) }' || fail "the validation loss did not fall ($first -> $last)"
grep -h "^sample:" "$work"/step*.out >/dev/null || fail "no sample printed"
echo "readme tour: OK (validation loss $first -> $last)"
