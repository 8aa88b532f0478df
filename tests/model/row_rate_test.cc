// Open-loop rows: arrival kinds with a rate step, the measured interval as a duration or a count,
// stability gates, rate claims, levels read as rates, and the sample each third of the interval
// needs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "capq/model/row_loader.h"
#include "row_text.h"

namespace capq {
namespace {

using testing::ReadAll;
using testing::Replace;

const std::string kSource = CAPQ_SOURCE_DIR;
const std::string kGood = kSource + "/tests/data/rows_good";

const std::string kRate = kGood + "/ratefam";

TEST(RateRows, APoissonRowWithADurationAndAClaim) {
  Result<Row> r = LoadRow(kRate + "/rate_poisson_duration.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->open_loop());
  EXPECT_EQ(r->workload.arrival_kind, ArrivalKind::kPoisson);
  const OpenLoop& o = r->workload.open_loop;
  EXPECT_EQ(o.rate_step_rps, 0.5);
  EXPECT_EQ(o.cv, 1);
  ASSERT_TRUE(o.duration_s.has_value());
  EXPECT_EQ(*o.duration_s, 300);
  EXPECT_FALSE(o.requests.has_value());
  EXPECT_EQ(o.ramp_s, 10);
  // The stability gates take their documented defaults.
  EXPECT_EQ(r->stability.queue_growth_pct, 25);
  EXPECT_EQ(r->stability.queue_slack, 2);
  EXPECT_EQ(r->stability.latency_drift_factor, 1.5);
  EXPECT_EQ(r->stability.max_send_lateness_ms, 2);
  ASSERT_TRUE(r->expect.rmax_rps.has_value());
  EXPECT_EQ(*r->expect.rmax_rps, 4.5);
  EXPECT_FALSE(r->expect.cmax.has_value());
  EXPECT_EQ(MeasuredRequestsAtOneStep(*r), 150);
  EXPECT_EQ(RateAtLevel(*r, 9), 4.5);
  EXPECT_EQ(LevelAtRate(*r, 4.5), 9);
}

TEST(RateRows, AGammaRowWithACountEveryStabilityGateAndNoClaim) {
  Result<Row> r = LoadRow(kRate + "/rate_gamma_requests.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->workload.arrival_kind, ArrivalKind::kGamma);
  const OpenLoop& o = r->workload.open_loop;
  EXPECT_EQ(o.rate_step_rps, 0.25);
  EXPECT_EQ(o.cv, 2.0);
  EXPECT_FALSE(o.duration_s.has_value());
  ASSERT_TRUE(o.requests.has_value());
  EXPECT_EQ(*o.requests, 600);
  EXPECT_EQ(o.ramp_s, 0);
  EXPECT_EQ(r->stability.queue_growth_pct, 10);
  EXPECT_EQ(r->stability.queue_slack, 3.5);
  EXPECT_EQ(r->stability.latency_drift_factor, 1.25);
  EXPECT_EQ(r->stability.max_send_lateness_ms, 1);
  EXPECT_FALSE(r->expect.rmax_rps.has_value());
  EXPECT_FALSE(r->expect.cmax.has_value());
  EXPECT_EQ(MeasuredRequestsAtOneStep(*r), 600);
}

TEST(RateRows, AConstantRowAndAClaimAtAFractionalStep) {
  Result<Row> r = LoadRow(kRate + "/rate_constant.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->workload.arrival_kind, ArrivalKind::kConstant);
  EXPECT_EQ(r->workload.open_loop.cv, 0);
  EXPECT_EQ(r->stability.queue_growth_pct, 0);
  EXPECT_EQ(r->stability.queue_slack, 2);
  // 0.7 is not 7 * 0.1 in binary; it is a multiple within the relative tolerance.
  ASSERT_TRUE(r->expect.rmax_rps.has_value());
  EXPECT_EQ(*r->expect.rmax_rps, 0.7);
  EXPECT_EQ(LevelAtRate(*r, 0.7), 7);
  EXPECT_EQ(MeasuredRequestsAtOneStep(*r), 120);
}

TEST(RateRows, ClosedLoopRowsKeepTheirShape) {
  Result<Row> r = LoadRow(kGood + "/realfam/minimal_real.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->open_loop());
  EXPECT_EQ(r->workload.arrival_kind, ArrivalKind::kClosedLoop);
  EXPECT_FALSE(r->expect.rmax_rps.has_value());
  EXPECT_EQ(RateAtLevel(*r, 4), 0);
  EXPECT_EQ(LevelAtRate(*r, 2), 0);
  EXPECT_EQ(MeasuredRequestsAtOneStep(*r), 0);
  EXPECT_EQ(RowToYaml(*r).find("stability"), std::string::npos);
  EXPECT_NE(RowToYaml(*r).find("arrival: {kind: closed_loop}\n"), std::string::npos);
}

TEST(RateRows, KindNamesAndLevels) {
  EXPECT_STREQ(ArrivalKindName(ArrivalKind::kClosedLoop), "closed_loop");
  EXPECT_STREQ(ArrivalKindName(ArrivalKind::kConstant), "constant");
  EXPECT_STREQ(ArrivalKindName(ArrivalKind::kPoisson), "poisson");
  EXPECT_STREQ(ArrivalKindName(ArrivalKind::kGamma), "gamma");
  Row row;
  row.workload.arrival_kind = ArrivalKind::kPoisson;
  row.workload.open_loop.rate_step_rps = 0.3;
  for (int level : {1, 2, 3, 7, 10, 1000}) {
    EXPECT_DOUBLE_EQ(RateAtLevel(row, level), level * 0.3);
    EXPECT_EQ(LevelAtRate(row, RateAtLevel(row, level)), level);
  }
}

// One helper writes a level wherever it is shown: C on a closed-loop row, the rate with the step's
// decimals on a rate row, and a name-safe slug for test names and trial folders.
TEST(RateRows, ALevelReadsAsAConcurrencyOrARate) {
  Row closed;
  EXPECT_EQ(LoadLabel(closed, 6), "C=6");
  EXPECT_EQ(LoadScaleOf(closed).Max(), "Cmax");
  EXPECT_EQ(LoadScaleOf(closed).Slug(6), "c6");
  EXPECT_EQ(LoadScaleOf(closed).Rate(6), 0);
  Row rate;
  rate.workload.arrival_kind = ArrivalKind::kPoisson;
  rate.workload.open_loop.rate_step_rps = 0.25;
  EXPECT_EQ(LoadLabel(rate, 5), "R=1.25 rps");
  EXPECT_EQ(LoadLabel(rate, 6), "R=1.50 rps");
  EXPECT_EQ(LoadScaleOf(rate).Value(4), "1.00 rps");
  EXPECT_EQ(LoadScaleOf(rate).Max(), "Rmax");
  EXPECT_EQ(LoadScaleOf(rate).Slug(5), "r1p25");
  rate.workload.open_loop.rate_step_rps = 0.1;
  EXPECT_EQ(LoadLabel(rate, 3), "R=0.3 rps");  // 3 * 0.1 is 0.30000000000000004 in binary
  EXPECT_NE(LoadScaleOf(rate).Rate(3), 0.3);
  EXPECT_EQ(LoadScaleOf(rate).RoundedRate(3), 0.3);  // the rate a row written back claims
  EXPECT_EQ(LoadScaleOf(closed).RoundedRate(3), 0);
  rate.workload.open_loop.rate_step_rps = 2;
  EXPECT_EQ(LoadLabel(rate, 3), "R=6 rps");
  EXPECT_EQ(LoadScaleOf(rate).Slug(3), "r6");
}

// Every open-loop field written by RowToYaml loads back to the same value.
TEST(RateRows, RowToYamlRoundTripsEveryOpenLoopField) {
  for (const char* name :
       {"rate_poisson_duration.yaml", "rate_gamma_requests.yaml", "rate_constant.yaml"}) {
    SCOPED_TRACE(name);
    Result<Row> r = LoadRow(kRate + "/" + name);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const std::string yaml = RowToYaml(*r);
    Result<Row> again = LoadRowFromString(yaml, r->source_path);
    ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << yaml;
    EXPECT_EQ(RowToYaml(*again), yaml);
    const OpenLoop &a = r->workload.open_loop, &b = again->workload.open_loop;
    EXPECT_EQ(again->workload.arrival_kind, r->workload.arrival_kind);
    EXPECT_EQ(b.rate_step_rps, a.rate_step_rps);
    EXPECT_EQ(b.cv, a.cv);
    EXPECT_EQ(b.duration_s, a.duration_s);
    EXPECT_EQ(b.requests, a.requests);
    EXPECT_EQ(b.ramp_s, a.ramp_s);
    EXPECT_EQ(again->stability.queue_growth_pct, r->stability.queue_growth_pct);
    EXPECT_EQ(again->stability.queue_slack, r->stability.queue_slack);
    EXPECT_EQ(again->stability.latency_drift_factor, r->stability.latency_drift_factor);
    EXPECT_EQ(again->stability.max_send_lateness_ms, r->stability.max_send_lateness_ms);
    EXPECT_EQ(again->expect.rmax_rps, r->expect.rmax_rps);
    EXPECT_EQ(again->expect.cmax, r->expect.cmax);
    // The claim is in the expect: block that qualify splices into the row file.
    if (r->expect.rmax_rps) {
      EXPECT_NE(yaml.find("expect:\n  rmax_rps: "), std::string::npos) << yaml;
    }
  }
}

TEST(RateRows, ARateRowWithoutAnExpectationGainsOneInTheWrittenRow) {
  Result<Row> r = LoadRow(kRate + "/rate_gamma_requests.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Row claimed = *r;
  claimed.expect.rmax_rps = 1.25;
  Result<Row> again = LoadRowFromString(RowToYaml(claimed), r->source_path);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->expect.rmax_rps, 1.25);
}

TEST(RateRows, EachThirdMustHoldTwoSamplesBeyondEveryGatedPercentile) {
  EXPECT_EQ(MinRequestsPerThirdForPercentile(95), 40);
  EXPECT_EQ(MinRequestsPerThirdForPercentile(99), 200);
  EXPECT_EQ(MinRequestsPerThirdForPercentile(90), 20);
  EXPECT_EQ(MinRequestsPerThirdForPercentile(50), 4);
  EXPECT_EQ(MinRequestsPerThirdForPercentile(99.9), 2000);
  EXPECT_EQ(MinRequestsPerThirdForPercentile(0), 0);
  EXPECT_EQ(MinRequestsPerThirdForPercentile(100), 0);

  const std::string base = ReadAll(kRate + "/rate_poisson_duration.yaml");
  const std::string path = kRate + "/x.yaml";
  struct Case {
    const char* interval;
    const char* step;
    bool ok;
  };
  // p95: 120 requests at one step.
  for (const Case& c :
       {Case{"duration_s: 240", "0.5", true}, Case{"duration_s: 239.9", "0.5", false},
        Case{"requests: 120", "0.5", true}, Case{"requests: 119", "0.5", false},
        Case{"duration_s: 1200", "0.1", true}, Case{"duration_s: 1199", "0.1", false}}) {
    SCOPED_TRACE(std::string(c.interval) + " at step " + c.step);
    std::string text = Replace(base, "duration_s: 300", c.interval);
    text = Replace(text, "rate_step_rps: 0.5", std::string("rate_step_rps: ") + c.step);
    text = Replace(text, "rmax_rps: 4.5", "rmax_rps: 1");
    Result<Row> r = LoadRowFromString(text, path);
    EXPECT_EQ(r.ok(), c.ok) << r.status().ToString();
    if (!c.ok) {
      EXPECT_NE(r.status().message().find("needs at least 40 requests"), std::string::npos)
          << r.status().message();
      EXPECT_NE(r.status().message().find(":28:"), std::string::npos) << r.status().message();
    }
  }
  // floor(duration_s * rate_step_rps) is taken on the decimal values: 90 s at 0.7/s is 63, though
  // the binary product is 62.99999999999999.
  Row row;
  row.workload.arrival_kind = ArrivalKind::kConstant;
  row.workload.open_loop.rate_step_rps = 0.7;
  row.workload.open_loop.duration_s = 90;
  EXPECT_EQ(MeasuredRequestsAtOneStep(row), 63);
}

TEST(RateRows, TheSimRateRowLoadsWithItsClaimOnTheStep) {
  Result<Row> r = LoadRow(kSource + "/rows/sim/sim_small_rate.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->open_loop());
  EXPECT_EQ(r->workload.arrival_kind, ArrivalKind::kPoisson);
  ASSERT_TRUE(r->expect.rmax_rps.has_value());
  EXPECT_EQ(LevelAtRate(*r, *r->expect.rmax_rps), 1);  // one step: 0.75 rps
  EXPECT_FALSE(r->expect.cmax.has_value());
  Result<Row> reference = LoadRow(kSource + "/rows/sim/sim_small_reference.yaml");
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  EXPECT_EQ(r->identity.sim_profile, reference->identity.sim_profile);
  EXPECT_EQ(r->identity.image, reference->identity.image);
  EXPECT_EQ(r->identity.time_scale, reference->identity.time_scale);
  ASSERT_EQ(r->slo.size(), reference->slo.size());
  EXPECT_EQ(r->slo[0].below_ms, reference->slo[0].below_ms);
  EXPECT_EQ(r->slo[0].percentile, reference->slo[0].percentile);
}

}  // namespace
}  // namespace capq
