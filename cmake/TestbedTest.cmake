# testbed_add_test(<name> SOURCES ... [LIBS ...] [LABELS label] [TIMEOUT s]
#                  [RUNS_CLI] [SERIAL])
# One GoogleTest executable per unit, each test case registered with CTest.
#   RUNS_CLI  the tests run the `testbed` binary (TESTBED_CLI_PATH), and it
#             builds the daemons `testbed local` starts
#   SERIAL    each case starts many processes: CTest runs them one at a time
include(GoogleTest)

function(testbed_add_test name)
  cmake_parse_arguments(arg "RUNS_CLI;SERIAL" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE ${arg_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  if(arg_RUNS_CLI)
    target_compile_definitions(${name} PRIVATE TESTBED_CLI_PATH="$<TARGET_FILE:testbed>")
    add_dependencies(${name} testbed)
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 300)
  endif()
  set(properties TIMEOUT ${arg_TIMEOUT})
  if(arg_SERIAL)
    list(APPEND properties RUN_SERIAL TRUE)
  endif()
  # An empty LABELS value would vanish from the list and shift every property
  # after it. A list of labels would too: discovery flattens the properties
  # once more on its way to set_tests_properties, so one label per test.
  list(LENGTH arg_LABELS label_count)
  if(label_count GREATER 1)
    message(FATAL_ERROR "testbed_add_test(${name}): one label at most, got ${arg_LABELS}")
  elseif(label_count EQUAL 1)
    list(APPEND properties LABELS ${arg_LABELS})
  endif()
  # Properties go through gtest_discover_tests: the cases are only known after
  # the build, so set_tests_properties at configure time would reach none.
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES ${properties})
endfunction()
