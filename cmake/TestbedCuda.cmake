# TESTBED_CUDA=AUTO|ON|OFF: CUDA memory (pinned host and device) and the
# reduction kernels. AUTO builds them when nvcc is found (at /usr/local/cuda
# or on PATH) and says so either way; ON insists; OFF leaves them out.
# Without them every other part of the testbed builds and runs, and asking for
# CUDA memory is a one-line error.
#
# Sets TESTBED_HAVE_CUDA. CMake 3.25 cannot compile CUDA as C++20, so the .cu
# files and the headers they include are C++17; the architectures are named
# (80: A100, 90: H100/H200) since "native" needs a GPU at build time.
set(TESTBED_CUDA AUTO CACHE STRING "CUDA memory and kernels: AUTO (when nvcc is found), ON, OFF")
set_property(CACHE TESTBED_CUDA PROPERTY STRINGS AUTO ON OFF)
set(TESTBED_HAVE_CUDA OFF)
if(TESTBED_CUDA STREQUAL "AUTO" AND (TESTBED_SANITIZE OR TESTBED_FUZZ))
  # Their flags are the host compiler's; the CUDA code is built and tested in
  # the plain build.
  message(STATUS "TESTBED_CUDA: AUTO is off in sanitizer and fuzz builds")
elseif(NOT TESTBED_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(TESTBED_HAVE_CUDA ON)
    message(STATUS "TESTBED_CUDA: building CUDA memory and kernels with "
                   "${CMAKE_CUDA_COMPILER} (CUDA ${CUDAToolkit_VERSION}, architectures "
                   "${CMAKE_CUDA_ARCHITECTURES})")
  elseif(TESTBED_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TESTBED_CUDA=ON, but no nvcc was found (looked at /usr/local/cuda/bin "
                        "and PATH): install the CUDA toolkit, or set CMAKE_CUDA_COMPILER")
  else()
    message(STATUS "TESTBED_CUDA: no nvcc found: building without CUDA memory "
                   "(--memory pinned and cuda will be refused)")
  endif()
endif()
