# Registers the capacity tests of a folder of rows: included by suites/CMakeLists.txt for rows/, and
# by the listing self-test (tests/suite/listing/) for a folder of test rows, so that both register
# alike. Needs the executable targets capq_capacity_suite, capq_sim_fixture and capq.
#
#   capq_capacity_rows(ROWS_DIR dir CAPACITY_DIR dir [DISCOVERY_MODE POST_BUILD|PRE_TEST])
#
# One ctest test per (row, level, trial): a closed-loop row's claim expect.cmax gives
# Capacity/AtCmax.*/<row>_c<C>_t<k> and Capacity/AboveCmax.*/<row>_c<C+1>_t<k>; a rate row's claim
# expect.rmax_rps gives Capacity/AtRmax.*/<row>_r<rate>_t<k> and Capacity/AboveRmax.*/<row>_r<rate +
# step>_t<k> (r1p25: 1.25 requests/s). Every test is labelled capacity, row=<id>, family=<folder>,
# side=pass|fail. Sets CAPQ_CAPACITY_ROW_FILES (the row files found) in the caller's scope.

# Reads `key: value` at the given indentation from a row file without a YAML parser: only `id` and
# `identity.engine` are needed here, and the suite's own listing (LoadRows) validates the whole row.
function(_capq_row_scalar file regex out)
  file(STRINGS "${file}" _lines REGEX "${regex}")
  set(_value "")
  if(_lines)
    list(GET _lines 0 _line)
    string(REGEX REPLACE "${regex}" "\\1" _value "${_line}")
  endif()
  set(${out} "${_value}" PARENT_SCOPE)
endfunction()

set(_capq_id_regex "^id:[ \t]*\"?([a-z][a-z0-9_]*)\"?[ \t]*(#.*)?$")

# Registers the tests of one row file (both sides) with their labels and properties. Reads
# CAPQ_CAPACITY_ROW_IDS, CAPQ_CAPACITY_DIR and CAPQ_DISCOVERY_MODE from the caller.
function(capq_capacity_row file family is_sim)
  _capq_row_scalar("${file}" "${_capq_id_regex}" id)
  if(id STREQUAL "")
    message(WARNING "capq: ${file} has no top-level `id:`; its capacity tests are not registered")
    return()
  endif()
  set(extra "--capq_rows=${file}")
  set(props RUN_SERIAL TRUE TIMEOUT 900)
  if(is_sim)
    list(APPEND extra "--capq_sim_state=${CAPQ_CAPACITY_DIR}/servers/${family}")
    list(APPEND props RESOURCE_LOCK "capq_server_sim_${family}" FIXTURES_REQUIRED "capq_sim_${family}")
  else()
    list(APPEND props RESOURCE_LOCK "capq_server_url")
  endif()
  # Listing runs the suite without EXTRA_ARGS (on the source tree's rows), so the row is selected
  # by name; a row whose id extends this one's with "_c..." or "_r..." is excluded explicitly.
  set(exclude "")
  foreach(other ${CAPQ_CAPACITY_ROW_IDS})
    foreach(level c r)
      string(FIND "${other}" "${id}_${level}" at)
      if(at EQUAL 0)
        string(APPEND exclude ":Capacity/*/${other}_c*:Capacity/*/${other}_r*")
        break()
      endif()
    endforeach()
  endforeach()
  if(NOT exclude STREQUAL "")
    string(SUBSTRING "${exclude}" 1 -1 exclude)
    set(exclude "-${exclude}")
  endif()
  # The row's kind decides which suites list it (the suite knows the kind; CMake need not): a
  # closed-loop row has only AtCmax/AboveCmax tests, a rate row only AtRmax/AboveRmax ones.
  foreach(side pass fail)
    if(side STREQUAL "pass")
      set(filter "Capacity/AtCmax.*/${id}_c*_t*:Capacity/AtRmax.*/${id}_r*_t*${exclude}")
    else()
      set(filter "Capacity/AboveCmax.*/${id}_c*_t*:Capacity/AboveRmax.*/${id}_r*_t*${exclude}")
    endif()
    set(list_var "capq_capacity_${id}_${side}")
    gtest_discover_tests(capq_capacity_suite
      EXTRA_ARGS ${extra}
      TEST_FILTER "${filter}"
      TEST_LIST ${list_var}
      DISCOVERY_TIMEOUT 30
      DISCOVERY_MODE ${CAPQ_DISCOVERY_MODE}
      NO_PRETTY_VALUES)
    # Several labels on a discovered test: PROPERTIES of gtest_discover_tests flattens lists (CMake
    # issue 17812) and a repeated LABELS key overrides the earlier one, so set them here, after the
    # discovered list is known (TEST_INCLUDE_FILES run in order).
    set(labels "capacity;row=${id};family=${family};side=${side}")
    if(NOT is_sim)
      list(APPEND labels real_server)
    endif()
    set(props_file "${CMAKE_CURRENT_BINARY_DIR}/${list_var}_properties.cmake")
    file(WRITE "${props_file}"
      "if(${list_var})\n"
      "  set_tests_properties(\${${list_var}} PROPERTIES LABELS \"${labels}\" ${props})\n"
      "endif()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${props_file}")
  endforeach()
endfunction()

function(capq_capacity_rows)
  cmake_parse_arguments(arg "" "ROWS_DIR;CAPACITY_DIR;DISCOVERY_MODE" "" ${ARGN})
  set(CAPQ_CAPACITY_DIR "${arg_CAPACITY_DIR}")
  set(CAPQ_DISCOVERY_MODE POST_BUILD)
  if(arg_DISCOVERY_MODE)
    set(CAPQ_DISCOVERY_MODE ${arg_DISCOVERY_MODE})
  endif()

  file(GLOB_RECURSE files CONFIGURE_DEPENDS "${arg_ROWS_DIR}/*.yaml")
  list(FILTER files EXCLUDE REGEX "/profiles/")
  list(SORT files)
  set(CAPQ_CAPACITY_ROW_FILES ${files} PARENT_SCOPE)

  set(CAPQ_CAPACITY_ROW_IDS "")
  foreach(file ${files})
    _capq_row_scalar("${file}" "${_capq_id_regex}" id)
    list(APPEND CAPQ_CAPACITY_ROW_IDS "${id}")
  endforeach()

  set(sim_families "")
  foreach(file ${files})
    get_filename_component(dir "${file}" DIRECTORY)
    get_filename_component(family "${dir}" NAME)
    _capq_row_scalar("${file}" "^[ \t]+engine:[ \t]*\"?([a-z]+)\"?[ \t]*(#.*)?$" engine)
    set(is_sim FALSE)
    if(engine STREQUAL "sim")
      set(is_sim TRUE)
      list(APPEND sim_families "${family}")
      set(family_dir_${family} "${dir}")
    endif()
    capq_capacity_row("${file}" "${family}" ${is_sim})
  endforeach()

  # One long-lived simulator set per sim family, started before its first test and stopped after
  # its last one; ctest adds these to any selection that needs them (e.g. -L row=<sim row>).
  list(REMOVE_DUPLICATES sim_families)
  foreach(family ${sim_families})
    set(state "${CAPQ_CAPACITY_DIR}/servers/${family}")
    add_test(NAME capacity.${family}.sim_start
      COMMAND capq_sim_fixture start --capq $<TARGET_FILE:capq> --state-dir "${state}"
              "${family_dir_${family}}")
    add_test(NAME capacity.${family}.sim_stop
      COMMAND capq_sim_fixture stop --state-dir "${state}")
    set_tests_properties(capacity.${family}.sim_start PROPERTIES
      FIXTURES_SETUP "capq_sim_${family}" LABELS "capacity;family=${family}" TIMEOUT 120)
    set_tests_properties(capacity.${family}.sim_stop PROPERTIES
      FIXTURES_CLEANUP "capq_sim_${family}" LABELS "capacity;family=${family}" TIMEOUT 60)
  endforeach()
endfunction()
