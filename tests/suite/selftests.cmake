# Self-tests of the capacity suite (included from suites/CMakeLists.txt): rows that are wrong on
# purpose must make the suite binary FAIL, with the message a user needs. Each runs the suite on its
# own row folder (tests/data/rows_selftest/<case>/) with an in-process simulator.
set(_capq_selftest_rows "${PROJECT_SOURCE_DIR}/tests/data/rows_selftest")
set(_capq_selftest_driver "${CMAKE_CURRENT_LIST_DIR}/expect_suite_failure.cmake")

# name: test name suffix; case: folder under rows_selftest; expect: regex the failure text must
# contain; every: ON when every test of the folder must fail with `expect`.
function(capq_suite_selftest name case expect every)
  add_test(NAME capacity_selftest.${name}
    COMMAND "${CMAKE_COMMAND}"
      "-DSUITE=$<TARGET_FILE:capq_capacity_suite>"
      "-DROWS=${_capq_selftest_rows}/${case}"
      "-DOUT=${PROJECT_BINARY_DIR}/capacity/selftest/${name}"
      "-DEXPECT=${expect}"
      "-DEVERY=${every}"
      -P "${_capq_selftest_driver}")
  # Serial for the same reason as the capacity tests: the verdicts are latency measurements.
  set_tests_properties(capacity_selftest.${name} PROPERTIES
    LABELS "selftest;suite" RUN_SERIAL TRUE TIMEOUT 900)
endfunction()

# Claims one more than the real Cmax: the trials at the claimed Cmax miss the SLO.
capq_suite_selftest(claim_too_high wrong_claim "SLO missed at the claimed Cmax" OFF)
# Claims one less than the real Cmax: the trials at "Cmax+1" meet the SLO, so the capacity grew.
capq_suite_selftest(claim_too_low wrong_claim_low "capacity grew beyond the claimed Cmax" OFF)
# Pins a digest the simulator does not have: every test of the row fails before any load.
capq_suite_selftest(wrong_identity wrong_identity "identity mismatch" ON)
