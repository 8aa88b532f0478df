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

# Claims one more than the real Cmax: the trials at the claimed Cmax miss the SLO, and the message
# names the gate that decided with its value and bound.
capq_suite_selftest(claim_too_high wrong_claim
  "SLO missed at the claimed Cmax=7 .C=7., decided by SLO gate ttft p95: measured [0-9.]+ ms, threshold below 1400.0 ms"
  OFF)
# Claims one less than the real Cmax: the trials at "Cmax+1" meet the SLO, so the capacity grew.
capq_suite_selftest(claim_too_low wrong_claim_low
  "SLO met at C=Cmax.1=6, decided by SLO gate ttft p95 .the closest to its threshold.: measured [0-9.]+ ms, threshold below 1400.0 ms.*capacity grew beyond the claimed Cmax=5"
  OFF)
# Two gates, the claimed Cmax misses ITL while its TTFT passes: the message names ITL, not TTFT.
capq_suite_selftest(itl_decides_miss itl_decides_miss
  "SLO missed at the claimed Cmax=6 .C=6., decided by SLO gate itl p95: measured [0-9.]+ ms, threshold below 12.3 ms"
  OFF)
# Two gates, "Cmax+1" meets both: the message names ITL, the gate that came closest to its bound.
capq_suite_selftest(itl_decides_growth itl_decides_growth
  "SLO met at C=Cmax.1=6, decided by SLO gate itl p95 .the closest to its threshold.: measured [0-9.]+ ms, threshold below 14.0 ms.*capacity grew beyond the claimed Cmax=5"
  OFF)
# A mixed row claiming one more than its Cmax: the message lists each class's gate and names a
# class that missed. Which class misses first at C=7 varies with scheduling (heavy or reference,
# both over the gate by tens of percent), so the message must name one, not a given one.
capq_suite_selftest(mixed_class_named mixed_claim
  "SLO missed at the claimed Cmax=7 .C=7..*MISSED class [a-z]+ .[0-9]+ requests. SLO gate ttft p95: measured [0-9.]+ ms, threshold below 1200.0 ms"
  OFF)
# Pins a digest the simulator does not have: every test of the row fails before any load.
capq_suite_selftest(wrong_identity wrong_identity "identity mismatch" ON)

# What `ctest -L row=<id>` lists, checked on rows registered like rows/ (suites/capacity_rows.cmake)
# without running them: a rate claim's AtRmax and AboveRmax tests at Rmax and Rmax + one step, a
# concurrency claim's AtCmax and AboveCmax ones, each with its row's labels. listing_rate_rush's id
# extends listing_rate's with "_r", which listing_rate's own filter would match.
set(_capq_listing_rows "${PROJECT_SOURCE_DIR}/tests/data/rows_listing")
set(_capq_listing_driver "${CMAKE_CURRENT_LIST_DIR}/expect_listing.cmake")
function(capq_suite_listing name row at above pass_level fail_level trials)
  add_test(NAME capacity_selftest.listing_${name}
    COMMAND "${CMAKE_COMMAND}"
      "-DSUITE=$<TARGET_FILE:capq_capacity_suite>"
      "-DSIM_FIXTURE=$<TARGET_FILE:capq_sim_fixture>"
      "-DCAPQ=$<TARGET_FILE:capq>"
      "-DSOURCE_DIR=${PROJECT_SOURCE_DIR}"
      "-DROWS=${_capq_listing_rows}"
      "-DOUT=${PROJECT_BINARY_DIR}/capacity/selftest/listing_${name}"
      "-DROW=${row}" "-DFAMILY=listfam" "-DAT=${at}" "-DABOVE=${above}"
      "-DPASS_LEVEL=${pass_level}" "-DFAIL_LEVEL=${fail_level}" "-DTRIALS=${trials}"
      -P "${_capq_listing_driver}")
  set_tests_properties(capacity_selftest.listing_${name} PROPERTIES
    LABELS "selftest;suite" TIMEOUT 120)
endfunction()
capq_suite_listing(rate listing_rate AtRmax AboveRmax r1p25 r1p50 3)
capq_suite_listing(rate_prefix listing_rate_rush AtRmax AboveRmax r0p50 r0p75 3)
capq_suite_listing(closed listing_closed AtCmax AboveCmax c6 c7 1)
