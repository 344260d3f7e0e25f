# ColossalGenerate.cmake — colossal_generate(): generated training programs in
# a CMake project, the way protobuf_generate adds generated protobuf code.
#
#   colossal_generate(TARGET model.c
#                     [MODEL name]        # MODEL(name) in the file (default: the file's stem)
#                     [BATCH n]           # global batch (--batch)
#                     [CLUSTER c]         # preset or FILE.json (--cluster; default: cpu for
#                                         #  TARGETS cpu, h100:1x1 for cuda)
#                     [MEM m]             # per-device memory limit (--mem)
#                     [TARGETS cpu|cuda]  # the backend this target links (default cpu)
#                     [OUTPUT_DIR dir]    # default <binary dir>/colossal/<target>
#                     [OPTIONS ...])      # any other colossal-compile flags (-D..., --strategy dp, ...)
#
# At build time, and only when the model file, the compiler or the options
# change, runs `colossal-compile model.c --emit code` into OUTPUT_DIR, then
# adds <name>.c and <name>_kernels.c (or _kernels.cu) to TARGET, the
# directory holding <name>.h to its include path, and links the matching
# runtime (Colossal::colrt_cpu or Colossal::colrt_cuda); for cuda, the target's
# CUDA_ARCHITECTURES become 80;90 (A100, H100/H200; COLOSSAL_CUDA_ARCHITECTURES
# changes that) unless the target sets its own. The generated sources are
# compiled with -O2 when the project sets no build type (CMake's default
# compiles without optimization, and generated kernels are hot loops); a build
# type the project chooses (Debug, Release, ...) is left alone. No -march is
# added: built by GCC on x86-64 glibc, the kernels carry x86-64-v4/v3 clones
# the loader picks from (docs/cmake.md, "Vector kernels without -march"). Sets
# <TARGET>_COLOSSAL_DIR in the caller's scope to the output directory.
# Works in the colossal source tree (examples/) and from an installed
# package (find_package(Colossal)); see docs/cmake.md.
include_guard(GLOBAL)

function(colossal_generate target model_file)
  cmake_parse_arguments(CG "" "MODEL;BATCH;CLUSTER;MEM;OUTPUT_DIR" "TARGETS;OPTIONS" ${ARGN})
  if(CG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "colossal_generate(${target}): unknown arguments: ${CG_UNPARSED_ARGUMENTS} "
                        "(known: MODEL BATCH CLUSTER MEM TARGETS OUTPUT_DIR OPTIONS)")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "colossal_generate: '${target}' is not a target: add_executable(${target} ...) first")
  endif()
  if(NOT TARGET Colossal::colossal-compile)
    message(FATAL_ERROR "colossal_generate: Colossal::colossal-compile is not defined: find_package(Colossal) first")
  endif()
  get_filename_component(model_file "${model_file}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${model_file}")
    message(FATAL_ERROR "colossal_generate(${target}): model file '${model_file}' does not exist")
  endif()
  if(NOT CG_MODEL)
    get_filename_component(CG_MODEL "${model_file}" NAME_WE)
  endif()
  if(NOT CG_MODEL MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "colossal_generate(${target}): MODEL '${CG_MODEL}' is not a C identifier: "
                        "give MODEL <name> as in MODEL(name) in ${model_file}")
  endif()
  if(NOT CG_TARGETS)
    set(CG_TARGETS cpu)
  endif()
  list(LENGTH CG_TARGETS n_targets)
  if(n_targets GREATER 1 OR NOT CG_TARGETS MATCHES "^(cpu|cuda)$")
    message(FATAL_ERROR "colossal_generate(${target}): TARGETS '${CG_TARGETS}': give one of cpu, cuda "
                        "(one runtime per program; call colossal_generate on a second target for the other)")
  endif()
  if(CG_TARGETS STREQUAL "cuda")
    if(NOT TARGET Colossal::colrt_cuda)
      message(FATAL_ERROR "colossal_generate(${target}): TARGETS cuda, but Colossal::colrt_cuda is not "
                          "defined: this Colossal was built without nvcc, or this machine has no CUDA toolkit "
                          "(find_package(Colossal REQUIRED COMPONENTS cuda) says which)")
    endif()
    set(kernels "${CG_MODEL}_kernels.cu")
    set(runtime Colossal::colrt_cuda)
  else()
    set(kernels "${CG_MODEL}_kernels.c")
    set(runtime Colossal::colrt_cpu)
  endif()
  if(NOT CG_OUTPUT_DIR)
    set(CG_OUTPUT_DIR "${CMAKE_CURRENT_BINARY_DIR}/colossal/${target}")
  endif()

  set(args "${model_file}" --model ${CG_MODEL} --emit code --target ${CG_TARGETS} -q -o "${CG_OUTPUT_DIR}")
  if(COLOSSAL_MODEL_INCLUDE_DIR)
    list(APPEND args -I "${COLOSSAL_MODEL_INCLUDE_DIR}")
  endif()
  if(CG_BATCH)
    list(APPEND args --batch ${CG_BATCH})
  endif()
  if(NOT CG_CLUSTER) # plan for the machine the program runs on
    if(CG_TARGETS STREQUAL "cpu")
      set(CG_CLUSTER cpu)
    else()
      set(CG_CLUSTER h100:1x1)
    endif()
  endif()
  list(APPEND args --cluster ${CG_CLUSTER})
  if(CG_MEM)
    list(APPEND args --mem ${CG_MEM})
  endif()
  list(APPEND args ${CG_OPTIONS})

  # The options stamp: rewritten (and so newer) only when the options change.
  string(REPLACE ";" "\n" stamp_text "${args}")
  file(CONFIGURE OUTPUT "${CG_OUTPUT_DIR}/${CG_MODEL}.options" CONTENT "${stamp_text}\n")

  # In the source tree the compiler is a target built first; installed, a file.
  get_target_property(compiler Colossal::colossal-compile ALIASED_TARGET)
  if(NOT compiler)
    set(compiler "$<TARGET_FILE:Colossal::colossal-compile>")
  endif()
  set(outputs "${CG_OUTPUT_DIR}/${CG_MODEL}.h" "${CG_OUTPUT_DIR}/${CG_MODEL}.c" "${CG_OUTPUT_DIR}/${kernels}")
  add_custom_command(OUTPUT ${outputs}
    COMMAND Colossal::colossal-compile ${args}
    DEPENDS "${model_file}" "${CG_OUTPUT_DIR}/${CG_MODEL}.options" ${compiler}
    COMMENT "colossal-compile ${CG_MODEL} (${target}, ${CG_TARGETS})"
    VERBATIM)
  target_sources(${target} PRIVATE ${outputs})
  if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
    set_source_files_properties("${CG_OUTPUT_DIR}/${CG_MODEL}.c" "${CG_OUTPUT_DIR}/${kernels}"
      TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS "-O2")
  endif()
  target_include_directories(${target} PRIVATE "${CG_OUTPUT_DIR}")
  target_link_libraries(${target} PRIVATE ${runtime})
  if(CG_TARGETS STREQUAL "cuda")
    # Machine code for A100 and H100/H200 by default (COLOSSAL_CUDA_ARCHITECTURES
    # to change it), so a first launch does not JIT-compile the kernels from PTX;
    # a CUDA_ARCHITECTURES set on the target itself is kept.
    get_target_property(archs ${target} CUDA_ARCHITECTURES)
    if(NOT archs OR "${archs}" STREQUAL "${CMAKE_CUDA_ARCHITECTURES}")
      if(NOT COLOSSAL_CUDA_ARCHITECTURES)
        set(COLOSSAL_CUDA_ARCHITECTURES "80;90")
      endif()
      set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES "${COLOSSAL_CUDA_ARCHITECTURES}")
    endif()
  endif()
  set(${target}_COLOSSAL_DIR "${CG_OUTPUT_DIR}" PARENT_SCOPE)
endfunction()
