# Behaviour held still across a redesign: what capq prints for the shipped rows (rows check, rows
# show and predict of every row, a whole qualification of sim_small_short against the embedded
# simulator, and that qualification's capacity data) compared with the text kept in
# tests/data/golden/. Measured figures, times and paths differ from run to run; they are masked
# (see Mask below) so that every verdict, level, count, name and message still has to match.
#   cmake -DCAPQ=exe -DSOURCE_DIR=dir -DOUT=dir [-DRECORD=ON] -P golden.cmake
# RECORD=ON rewrites the kept text instead of comparing: do that only for a change of behaviour
# meant by its commit.
foreach(var CAPQ SOURCE_DIR OUT)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "golden: -D${var}=... is required")
  endif()
endforeach()
set(golden_dir "${SOURCE_DIR}/tests/data/golden")
file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}")
set(mismatches "")

# Figures with a fraction, percentages, timestamps, durations and this run's paths.
function(Mask text out_var)
  string(REPLACE "${OUT}" "<OUT>" text "${text}")
  string(REPLACE "${SOURCE_DIR}" "<SRC>" text "${text}")
  string(REGEX REPLACE "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9:.]+Z" "<UTC>" text "${text}")
  string(REGEX REPLACE "[0-9]+T[0-9]+Z" "<UTC>" text "${text}")
  string(REGEX REPLACE "127\\.0\\.0\\.1:[0-9]+" "<URL>" text "${text}")
  string(REGEX REPLACE "\\[[0-9][0-9]:[0-9][0-9]:[0-9][0-9]\\]" "[<TIME>]" text "${text}")
  string(REGEX REPLACE "[0-9a-f]+(  [a-z_]+\\.[a-z]+)" "<SHA>\\1" text "${text}")
  string(REGEX REPLACE "ETA [0-9]+ (s|min)" "ETA #" text "${text}")
  string(REGEX REPLACE "-?[0-9]+\\.[0-9]+(e[-+]?[0-9]+)?" "#" text "${text}")
  string(REGEX REPLACE "[0-9]+(\\.[0-9]+)?%" "#%" text "${text}")
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

# Runs capq with `args` from the source folder; keeps exit code, stdout and stderr as one text.
function(Capture name)
  execute_process(COMMAND "${CAPQ}" ${ARGN}
    WORKING_DIRECTORY "${SOURCE_DIR}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 600)
  Mask("exit ${rc}\n--- stdout\n${out}--- stderr\n${err}" text)
  Compare("${name}" "${text}")
  # Compare set it in this function's scope; the run's verdict reads it at the top.
  set(mismatches "${mismatches}" PARENT_SCOPE)
endfunction()

function(Compare name text)
  set(kept "${golden_dir}/${name}.txt")
  if(RECORD)
    file(WRITE "${kept}" "${text}")
    return()
  endif()
  file(WRITE "${OUT}/${name}.txt" "${text}")
  if(NOT EXISTS "${kept}")
    set(mismatches "${mismatches}\n  ${name}: no kept text ${kept}" PARENT_SCOPE)
    return()
  endif()
  file(READ "${kept}" want)
  if(NOT want STREQUAL text)
    execute_process(COMMAND diff -u "${kept}" "${OUT}/${name}.txt" OUTPUT_VARIABLE d)
    message("golden: ${name} differs:\n${d}")
    set(mismatches "${mismatches}\n  ${name}" PARENT_SCOPE)
  endif()
endfunction()

set(ENV{CAPQ_URL} "")
set(ENV{CAPQ_LOG_LEVEL} "")
Capture(rows_check rows check)
file(GLOB_RECURSE row_files RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/rows/*.yaml")
list(FILTER row_files EXCLUDE REGEX "/profiles/")
list(SORT row_files)
foreach(row ${row_files})
  get_filename_component(id "${row}" NAME_WE)
  Capture("rows_show_${id}" rows show "${id}")
  Capture("predict_${id}" predict "${row}")
endforeach()
# --full-trials: a trial decided early stops at a moment the loop's 50 ms tick sets, so how many
# requests it finished varies from run to run; run whole, every count is the row's own.
Capture(qualify_sim_small_short qualify rows/sim/sim_small_short.yaml --out "${OUT}/qualify"
  --full-trials)
file(READ "${OUT}/qualify/capacity-data.json" data)
Mask("${data}" data)
Compare(qualify_sim_small_short_capacity_data "${data}")

if(NOT mismatches STREQUAL "")
  message(FATAL_ERROR "golden: capq's behaviour changed:${mismatches}\nThe run's text is in ${OUT}.")
endif()
