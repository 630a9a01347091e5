# Finds every dependency from Debian's packages. A missing one stops the
# configure step with the apt package that provides it, instead of CMake's
# generic "could not find" message.

set(_testbed_missing "")

# testbed_require(<find_package args...> APT <debian packages>)
macro(testbed_require name)
  cmake_parse_arguments(_req "CONFIG" "" "APT" ${ARGN})
  if(_req_CONFIG)
    find_package(${name} CONFIG QUIET)
  else()
    find_package(${name} QUIET)
  endif()
  if(NOT ${name}_FOUND)
    list(APPEND _testbed_missing "${name} (apt-get install ${_req_APT})")
  endif()
endmacro()

testbed_require(absl CONFIG APT libabsl-dev)
testbed_require(Protobuf APT libprotobuf-dev protobuf-compiler)
testbed_require(gRPC CONFIG APT libgrpc++-dev protobuf-compiler-grpc)
# TESTBED_UCX_DIR=PREFIX builds against the UCX installed there instead of
# Debian's libucx0, which has no CUDA transports: `.ci/build-ucx-cuda PREFIX`
# builds Debian's own UCX source with CUDA into PREFIX (docs/gpu.md).
# It sets ucx_DIR, forced: in a build folder configured before, the cached
# ucx_DIR (Debian's) would otherwise win, silently. Build-tree binaries get
# PREFIX/lib in their RUNPATH; the sonames are Debian's, so a binary that
# cannot find PREFIX/lib falls back to Debian's UCX without a word.
set(TESTBED_UCX_DIR "" CACHE PATH
    "Prefix of a UCX to build against (e.g. one made by .ci/build-ucx-cuda); empty: Debian's")
if(TESTBED_UCX_DIR)
  if(NOT EXISTS "${TESTBED_UCX_DIR}/lib/cmake/ucx/ucx-config.cmake")
    message(FATAL_ERROR "TESTBED_UCX_DIR=${TESTBED_UCX_DIR} has no lib/cmake/ucx/ucx-config.cmake:"
                        " build one there with .ci/build-ucx-cuda ${TESTBED_UCX_DIR}")
  endif()
  set(ucx_DIR "${TESTBED_UCX_DIR}/lib/cmake/ucx" CACHE PATH "UCX's CMake config" FORCE)
  message(STATUS "UCX: ${TESTBED_UCX_DIR} (TESTBED_UCX_DIR)")
endif()
testbed_require(ucx CONFIG APT libucx-dev)
testbed_require(GTest APT libgtest-dev libgmock-dev)
testbed_require(CLI11 CONFIG APT libcli11-dev)
testbed_require(spdlog CONFIG APT libspdlog-dev)
testbed_require(Eigen3 CONFIG APT libeigen3-dev)  # the MLP's matrices; Eigen::half for float16
testbed_require(ZLIB APT zlib1g-dev)               # testbed train: gzipped IDX files
find_package(Threads REQUIRED)
# Debian's cpp-httplib ships pkg-config metadata, no CMake config.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
endif()
if(NOT HTTPLIB_FOUND)
  list(APPEND _testbed_missing "cpp-httplib (apt-get install pkg-config libcpp-httplib-dev)")
endif()

if(_testbed_missing)
  list(JOIN _testbed_missing "\n  " _testbed_missing_text)
  message(FATAL_ERROR
    "Missing build dependencies:\n  ${_testbed_missing_text}\n"
    "Install them all at once with: sudo .ci/install-deps")
endif()
