# Runs the capacity suite on a folder of rows that are wrong on purpose and passes only if the suite
# FAILS the way it should: a non-zero exit (1: tests failed, not 2: rows could not be loaded), at
# least one test run, the expected message in the failures, and with EVERY=ON every test failed with
# it. Reads the suite's own JSON report rather than scraping the console.
#   cmake -DSUITE=exe -DROWS=dir -DOUT=dir -DEXPECT=regex [-DEVERY=ON] -P expect_suite_failure.cmake
foreach(var SUITE ROWS OUT EXPECT)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "expect_suite_failure: -D${var}=... is required")
  endif()
endforeach()

# The self-test is about failing; an opt-in skip in the caller's environment must not hide that.
set(ENV{CAPQ_ALLOW_SKIP} "")
file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}")
set(report "${OUT}/gtest.json")
execute_process(
  COMMAND "${SUITE}" "--capq_rows=${ROWS}" "--capq_out=${OUT}/trials" "--gtest_output=json:${report}"
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err
  TIMEOUT 840)
message("${out}")
if(NOT "${err}" STREQUAL "")
  message("${err}")
endif()

if(NOT rc EQUAL 1)
  message(FATAL_ERROR "expect_suite_failure: the suite exited with '${rc}', want 1 (tests failed)")
endif()
if(NOT EXISTS "${report}")
  message(FATAL_ERROR "expect_suite_failure: the suite wrote no report ${report}")
endif()
file(READ "${report}" json)
string(JSON tests GET "${json}" tests)
string(JSON failures GET "${json}" failures)
if(tests LESS 1)
  message(FATAL_ERROR "expect_suite_failure: the suite ran no test for ${ROWS}")
endif()

# Walk every test: count the ones whose failure text matches EXPECT.
set(matching 0)
set(failed 0)
string(JSON nsuites LENGTH "${json}" testsuites)
math(EXPR last_suite "${nsuites} - 1")
foreach(i RANGE ${last_suite})
  string(JSON ntests LENGTH "${json}" testsuites ${i} testsuite)
  if(ntests EQUAL 0)
    continue()
  endif()
  math(EXPR last_test "${ntests} - 1")
  foreach(j RANGE ${last_test})
    string(JSON name GET "${json}" testsuites ${i} testsuite ${j} name)
    string(JSON nfail ERROR_VARIABLE no_failures LENGTH "${json}" testsuites ${i} testsuite ${j} failures)
    if(no_failures OR nfail EQUAL 0)
      message(STATUS "passed: ${name}")
      continue()
    endif()
    math(EXPR failed "${failed} + 1")
    set(text "")
    math(EXPR last_failure "${nfail} - 1")
    foreach(k RANGE ${last_failure})
      string(JSON f GET "${json}" testsuites ${i} testsuite ${j} failures ${k} failure)
      string(APPEND text "${f}\n")
    endforeach()
    if(text MATCHES "${EXPECT}")
      math(EXPR matching "${matching} + 1")
      message(STATUS "failed as expected: ${name}")
    else()
      message(STATUS "failed for another reason: ${name}")
    endif()
  endforeach()
endforeach()

if(matching EQUAL 0)
  message(FATAL_ERROR "expect_suite_failure: no failure says '${EXPECT}' (${failed} of ${tests} tests failed)")
endif()
if(EVERY AND NOT matching EQUAL tests)
  message(FATAL_ERROR "expect_suite_failure: ${matching} of ${tests} tests failed with '${EXPECT}'; want all")
endif()
message(STATUS "expect_suite_failure: ${matching} of ${tests} tests failed with '${EXPECT}', as they must")
