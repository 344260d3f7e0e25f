# install.cmake — what `cmake --install BUILD --prefix P` puts in P:
#   bin/colossal-compile
#   include/colossal/{colrt.h,model.h,hf.h}, include/colossal/train/ (the drivers' headers)
#   lib/libcolrt_cpu.a, lib/libcolossal_hf.a (and lib/libcolrt_cuda.a when CUDA was built)
#   lib/cmake/Colossal/ (find_package(Colossal): targets, colossal_generate)
#   lib/pkgconfig/colossal-cpu.pc (and colossal-cuda.pc)
#   share/colossal/examples/{gpt2,llama}/ (model, driver, CMakeLists.txt: examples/CMakeLists.txt)
# The targets install themselves into the export set ColossalTargets
# (compiler/CMakeLists.txt, runtime/CMakeLists.txt, tools/, examples/), except
# colrt_cuda: ColossalCudaTargets, the package's optional `cuda` component, so
# that a consumer without the CUDA toolkit still finds the rest. This file adds
# the rest.
include(CMakePackageConfigHelpers)

set(COLOSSAL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Colossal)
# colossal_generate() in this tree reads <colossal/model.h> from the sources
set(COLOSSAL_MODEL_INCLUDE_DIR ${PROJECT_SOURCE_DIR}/include)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/colossal DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
if(TARGET colrt_cpu)
  install(EXPORT ColossalTargets NAMESPACE Colossal:: DESTINATION ${COLOSSAL_CMAKE_DIR})
endif()
if(TARGET colrt_cuda)
  install(EXPORT ColossalCudaTargets NAMESPACE Colossal:: DESTINATION ${COLOSSAL_CMAKE_DIR})
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ColossalConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/ColossalConfig.cmake
  INSTALL_DESTINATION ${COLOSSAL_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/ColossalConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/ColossalConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/ColossalConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/ColossalGenerate.cmake
        DESTINATION ${COLOSSAL_CMAKE_DIR})

# pkg-config: one file per runtime backend
set(PC_BACKEND cpu)
set(PC_CFLAGS "-fopenmp")
set(PC_LIBS "-lcjson -lz -ldl -lm -lpthread -fopenmp")
configure_file(${PROJECT_SOURCE_DIR}/cmake/colossal.pc.in ${PROJECT_BINARY_DIR}/cmake/colossal-cpu.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cmake/colossal-cpu.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(TARGET colrt_cuda)
  set(PC_BACKEND cuda)
  set(PC_CFLAGS "")
  set(PC_LIBS "-L${CUDAToolkit_LIBRARY_DIR} -lcjson -lz -lnccl -lcublasLt -lcudart -lstdc++ -lm -lpthread")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/colossal.pc.in ${PROJECT_BINARY_DIR}/cmake/colossal-cuda.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/cmake/colossal-cuda.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()
