# Checks what ctest lists for one row, as `ctest -L row=<id>` would select it: registers the rows of
# ROWS (tests/suite/listing/, through suites/capacity_rows.cmake like rows/), then reads
# `ctest -N --show-only=json-v1` and requires exactly the row's AT tests on the pass side and ABOVE
# tests on the fail side, named <row>_<LEVELS>_t<k>, each labelled capacity, row=<id>,
# family=<folder> and its side, and nothing of any other row.
#   cmake -DSUITE=exe -DSIM_FIXTURE=exe -DCAPQ=exe -DSOURCE_DIR=dir -DROWS=dir -DOUT=dir -DROW=id
#         -DFAMILY=name -DAT=AtRmax -DABOVE=AboveRmax -DPASS_LEVEL=r1p25 -DFAIL_LEVEL=r1p50
#         -DTRIALS=n -P expect_listing.cmake
cmake_policy(VERSION 3.25)

foreach(var SUITE SIM_FIXTURE CAPQ SOURCE_DIR ROWS OUT ROW FAMILY AT ABOVE PASS_LEVEL FAIL_LEVEL
            TRIALS)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "expect_listing: -D${var}=... is required")
  endif()
endforeach()

file(REMOVE_RECURSE "${OUT}")
execute_process(
  COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}/tests/suite/listing" -B "${OUT}"
          "-DCAPQ_SOURCE_DIR=${SOURCE_DIR}" "-DCAPQ_ROWS_DIR=${ROWS}" "-DCAPQ_SUITE=${SUITE}"
          "-DCAPQ_SIM_FIXTURE=${SIM_FIXTURE}" "-DCAPQ_EXE=${CAPQ}"
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "expect_listing: configuring the listing project failed:\n${out}\n${err}")
endif()

# The suite lists the rows CAPQ_ROWS names when it is given no --capq_rows (as at listing time).
set(ENV{CAPQ_ROWS} "${ROWS}")
get_filename_component(cmake_dir "${CMAKE_COMMAND}" DIRECTORY)
find_program(CTEST ctest HINTS "${cmake_dir}" REQUIRED)
execute_process(
  COMMAND "${CTEST}" --test-dir "${OUT}" -N --show-only=json-v1 -L "^row=${ROW}$"
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE json
  ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "expect_listing: ctest -N failed (${rc}):\n${err}")
endif()

string(JSON ntests LENGTH "${json}" tests)
set(problems "")
set(pass 0)
set(fail 0)
if(ntests GREATER 0)
  math(EXPR last "${ntests} - 1")
  foreach(i RANGE ${last})
    string(JSON name GET "${json}" tests ${i} name)
    if(NOT name MATCHES "^Capacity/")
      continue()  # the family's simulator start and stop
    endif()
    set(labels "")
    string(JSON nprops ERROR_VARIABLE no_props LENGTH "${json}" tests ${i} properties)
    if(NOT no_props AND nprops GREATER 0)
      math(EXPR plast "${nprops} - 1")
      foreach(p RANGE ${plast})
        string(JSON pname GET "${json}" tests ${i} properties ${p} name)
        if(pname STREQUAL "LABELS")
          string(JSON nl LENGTH "${json}" tests ${i} properties ${p} value)
          math(EXPR llast "${nl} - 1")
          foreach(l RANGE ${llast})
            string(JSON label GET "${json}" tests ${i} properties ${p} value ${l})
            list(APPEND labels "${label}")
          endforeach()
        endif()
      endforeach()
    endif()
    if(name MATCHES "^Capacity/${AT}\\.[A-Za-z]+/${ROW}_${PASS_LEVEL}_t[0-9]+$")
      set(side pass)
      math(EXPR pass "${pass} + 1")
    elseif(name MATCHES "^Capacity/${ABOVE}\\.[A-Za-z]+/${ROW}_${FAIL_LEVEL}_t[0-9]+$")
      set(side fail)
      math(EXPR fail "${fail} + 1")
    else()
      string(APPEND problems "  listed, but not one of ${ROW}'s ${AT}/${ABOVE} tests: ${name}\n")
      continue()
    endif()
    foreach(want capacity "row=${ROW}" "family=${FAMILY}" "side=${side}")
      if(NOT want IN_LIST labels)
        string(APPEND problems "  ${name} lacks the label ${want} (labels: ${labels})\n")
      endif()
    endforeach()
    message(STATUS "listed: ${name} [${labels}]")
  endforeach()
endif()
if(NOT pass EQUAL TRIALS)
  string(APPEND problems "  ${pass} ${AT} tests of ${ROW} at ${PASS_LEVEL}, want ${TRIALS}\n")
endif()
if(NOT fail EQUAL TRIALS)
  string(APPEND problems "  ${fail} ${ABOVE} tests of ${ROW} at ${FAIL_LEVEL}, want ${TRIALS}\n")
endif()
if(NOT problems STREQUAL "")
  message(FATAL_ERROR "expect_listing: `ctest -L row=${ROW}` does not list what it must:\n"
                      "${problems}")
endif()
message(STATUS "expect_listing: ${ROW} lists ${pass} ${AT} and ${fail} ${ABOVE} tests, labelled")
