# testbed_add_test(<name> SOURCES ... [LIBS ...] [LABEL tier] [TIMEOUT s]
#                  [RUNS_CLI] [SERIAL] [CASE_LABELS <gtest filter> <tier> ...]
#                  [SHARDS <ctest name> <gtest filter> <count> ...])
# One GoogleTest executable per unit, each test case registered with CTest.
#   LABEL       the tier of its cases (one of TESTBED_TEST_TIERS; default unit)
#   CASE_LABELS pairs: the cases a gtest filter selects carry that tier instead
#               (e.g. "NetnsTest.*" netns: the cases that build namespaces)
#   SHARDS      triples: the cases a gtest filter selects run as <count> CTest
#               tests <ctest name>.shard<i>of<count> (gtest's own sharding),
#               tier slow, instead of one process per case: for cross products
#               of thousands of short cases, whose start-ups would outweigh them
#   RUNS_CLI    the tests run the `testbed` binary (TESTBED_CLI_PATH), and it
#               builds the daemons `testbed local` starts
#   SERIAL      each case starts many processes: CTest runs them one at a time
include(GoogleTest)

# The tiers (ctest -L TIER): unit (pure computation and in-process, quick),
# integration (real daemons and processes on loopback), netns (emulated
# clusters, root), browser (headless chromium), docker (containers), slow
# (long cross products). README.md's "Tests" says how to run each.
set(TESTBED_TEST_TIERS unit integration netns browser docker slow)

# glibc keeps freed blocks up to 64 MiB for reuse rather than unmapping them.
set(_testbed_keep_freed_memory
    "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=1073741824")

function(_testbed_check_tier where tier)
  if(NOT tier IN_LIST TESTBED_TEST_TIERS)
    message(FATAL_ERROR "${where}: tier '${tier}' is not one of ${TESTBED_TEST_TIERS}")
  endif()
endfunction()

# testbed_label_test(<ctest test> <tier>): the tier of a test added with add_test.
function(testbed_label_test test tier)
  _testbed_check_tier(${test} ${tier})
  set_tests_properties(${test} PROPERTIES LABELS ${tier})
endfunction()

function(testbed_add_test name)
  cmake_parse_arguments(arg "RUNS_CLI;SERIAL" "TIMEOUT;LABEL" "SOURCES;LIBS;CASE_LABELS;SHARDS"
                        ${ARGN})
  add_executable(${name} ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE ${arg_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  if(arg_RUNS_CLI)
    target_compile_definitions(${name} PRIVATE TESTBED_CLI_PATH="$<TARGET_FILE:testbed>")
    add_dependencies(${name} testbed)
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 300)
  endif()
  if(NOT arg_LABEL)
    set(arg_LABEL unit)
  endif()
  _testbed_check_tier(${name} ${arg_LABEL})
  set(properties TIMEOUT ${arg_TIMEOUT})
  if(arg_SERIAL)
    list(APPEND properties RUN_SERIAL TRUE)
  endif()

  # Every filter that takes cases elsewhere is left out of the default set.
  set(elsewhere "")
  list(LENGTH arg_CASE_LABELS pairs)
  math(EXPR odd "${pairs} % 2")
  if(odd)
    message(FATAL_ERROR "testbed_add_test(${name}): CASE_LABELS takes filter-tier pairs")
  endif()
  set(case_filters "")
  set(case_tiers "")
  while(arg_CASE_LABELS)
    list(POP_FRONT arg_CASE_LABELS filter tier)
    _testbed_check_tier("${name} ${filter}" ${tier})
    list(APPEND case_filters ${filter})
    list(APPEND case_tiers ${tier})
    list(APPEND elsewhere ${filter})
  endwhile()
  set(shards ${arg_SHARDS})
  list(LENGTH shards triples)
  math(EXPR odd "${triples} % 3")
  if(odd)
    message(FATAL_ERROR "testbed_add_test(${name}): SHARDS takes name-filter-count triples")
  endif()
  while(shards)
    list(POP_FRONT shards shard_name filter count)
    list(APPEND elsewhere ${filter})
    math(EXPR last "${count} - 1")
    foreach(index RANGE ${last})
      math(EXPR shown "${index} + 1")
      set(test ${shard_name}.shard${shown}of${count})
      add_test(NAME ${test} COMMAND ${name} --gtest_filter=${filter} --gtest_brief=1)
      # GoogleTest's own sharding: every case runs in exactly one shard. The
      # cases allocate and free MiB-sized buffers thousands of times; glibc
      # would hand each back to the kernel (mmap above 128 KiB), and the page
      # faults were a third of the shards' time (docs/speed.md, "CI").
      set_tests_properties(${test} PROPERTIES LABELS slow TIMEOUT ${arg_TIMEOUT}
        ENVIRONMENT "GTEST_TOTAL_SHARDS=${count};GTEST_SHARD_INDEX=${index};${_testbed_keep_freed_memory}")
    endforeach()
  endwhile()

  # Properties go through gtest_discover_tests: the cases are only known after
  # the build, so set_tests_properties at configure time would reach none. A
  # list value would be flattened on the way: one label per case.
  foreach(filter tier IN ZIP_LISTS case_filters case_tiers)
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 TEST_FILTER ${filter}
                         PROPERTIES ${properties} LABELS ${tier})
  endforeach()
  set(rest "")
  if(elsewhere)
    list(JOIN elsewhere ":" rest)
    set(rest "-${rest}")
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 TEST_FILTER "${rest}"
                       PROPERTIES ${properties} LABELS ${arg_LABEL})
endfunction()
