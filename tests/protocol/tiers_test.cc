#include "capq/protocol/tiers.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "capq/protocol/artifacts.h"
#include "capq/protocol/trial.h"
#include "tier_test_util.h"

namespace capq {
namespace {

namespace fs = std::filesystem;
using testing::FakeTieredRow;

const SloGate kTtft95{SloMetric::kTtft, 95, 1000};
const SloGate kItl95{SloMetric::kItl, 95, 16};
const SloGate kTtft99{SloMetric::kTtft, 99, 1000};

// 100 measured requests: TTFT 1..100 x 9 ms (p95 855.45 ms, p99 891.09 ms), ITL 20 ms each.
TrialMetrics HundredRequests() {
  TrialMetrics m;
  m.requests = 100;
  for (int i = 1; i <= 100; ++i) {
    m.ttft_values_ms.push_back(9.0 * i);
    m.itl_values_ms.push_back(20.0);
    m.e2e_values_ms.push_back(9.0 * i + 20.0 * 63);
  }
  return m;
}

CorrectnessReport AllCorrect() {
  CorrectnessReport c;
  c.gates = {GateResult{"status_200", true, true, "", {}}};
  return c;
}

// The verdict of one trial written as the trial path writes it and read back as qualify reads it.
TrialSummary ReadBack(const TrialVerdict& v) {
  fs::path dir = fs::temp_directory_path() / ("capq_tiers_" + std::to_string(getpid()));
  fs::create_directories(dir);
  VerdictContext ctx;
  ctx.row_id = "tiered";
  ctx.phase = "confirm";
  std::ofstream(dir / "verdict.json") << VerdictToJson(v, ctx).dump(1);
  Result<TrialSummary> t = ReadTrialDir(dir.string());
  fs::remove_all(dir);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : TrialSummary{};
}

TEST(TierJudgementTest, OneTrialChecksEveryGateOfEveryTierOnce) {
  Row row = FakeTieredRow();
  TrialVerdict v = Decide(row, HundredRequests(), AllCorrect());
  // The row's own gate decides the outcome; the tiers' other gates ride along, once each (p95
  // TTFT is the primary's and ttft_itl's, and is not repeated).
  ASSERT_EQ(v.slo.size(), 1u);
  EXPECT_EQ(v.outcome, TrialOutcome::kPass);
  ASSERT_EQ(v.tier_slo.size(), 2u);
  EXPECT_EQ(v.tier_slo[0].gate.metric, SloMetric::kItl);
  EXPECT_DOUBLE_EQ(v.tier_slo[0].measured_ms, 20.0);
  EXPECT_FALSE(v.tier_slo[0].passed);
  EXPECT_EQ(v.tier_slo[1].gate.percentile, 99);
  EXPECT_NEAR(v.tier_slo[1].measured_ms, 891.09, 1e-9);
  EXPECT_TRUE(v.tier_slo[1].passed);
  // The tier gates take no part in the row's reasons: the failed ITL gate is the tier's business.
  for (const auto& r : v.reasons) EXPECT_EQ(r.find("itl"), std::string::npos) << r;
}

TEST(TierJudgementTest, EachTierReadsItsVerdictFromTheSameMeasurement) {
  Row row = FakeTieredRow();
  TrialSummary t = ReadBack(Decide(row, HundredRequests(), AllCorrect()));
  ASSERT_EQ(t.tier_slo.size(), 2u) << "verdict.json must carry the tier gates";
  EXPECT_EQ(TierOutcome(t, row.slo), "pass");
  EXPECT_EQ(TierOutcome(t, row.slo_tiers[0].slo), "slo_fail");  // ITL 20 ms is not below 16 ms
  EXPECT_EQ(TierOutcome(t, row.slo_tiers[1].slo), "pass");      // p99 891 ms < 1000 ms
  TrialSummary itl = TierView(t, row.slo_tiers[0].slo);
  ASSERT_EQ(itl.slo.size(), 2u);
  EXPECT_EQ(itl.slo[1].metric, "itl");
  EXPECT_FALSE(itl.passed());
  EXPECT_FALSE(itl.latency_pass);
  EXPECT_TRUE(itl.tier_slo.empty());
  EXPECT_EQ(itl.ttft_ms.p95, t.ttft_ms.p95) << "a view keeps every measured figure";
  // A bound exactly at the measured value fails: strictly below, for a tier as for the row.
  row.slo_tiers[1].slo[0].below_ms = t.tier_slo[1].measured_ms;
  TrialVerdict exact = Decide(row, HundredRequests(), AllCorrect());
  ASSERT_EQ(exact.tier_slo.size(), 2u);
  EXPECT_FALSE(exact.tier_slo[1].passed);
}

TEST(TierJudgementTest, NoTierPassesABrokenTrialOrAGateItDidNotJudge) {
  Row row = FakeTieredRow();
  TrialSummary t = ReadBack(Decide(row, HundredRequests(), AllCorrect()));
  const std::vector<SloGate> unjudged = {SloGate{SloMetric::kE2e, 95, 1e9}};
  EXPECT_EQ(FindCheck(t, unjudged[0]), nullptr);
  EXPECT_EQ(TierOutcome(t, unjudged), "slo_fail");
  EXPECT_TRUE(std::isnan(TierView(t, unjudged).slo[0].measured_ms));
  t.correctness_pass = false;
  t.outcome = "correctness_fail";
  EXPECT_EQ(TierOutcome(t, row.slo_tiers[1].slo), "correctness_fail");
  t.outcome = "slo_fail";  // a latency miss elsewhere with a broken stream is still no tier pass
  EXPECT_EQ(TierOutcome(t, row.slo_tiers[1].slo), "slo_fail");
}

TEST(TierJudgementTest, ARowWithoutTiersWritesNoTierGates) {
  Row row = FakeTieredRow();
  row.slo_tiers.clear();
  TrialVerdict v = Decide(row, HundredRequests(), AllCorrect());
  EXPECT_TRUE(v.tier_slo.empty());
  EXPECT_FALSE(VerdictToJson(v, VerdictContext{}).contains("tier_slo"));
}

TEST(TierOrderTest, AStricterContractCoversEveryGateOfTheLooserOne) {
  EXPECT_TRUE(AtLeastAsStrict({kTtft95, kItl95}, {kTtft95}));
  EXPECT_TRUE(AtLeastAsStrict({kTtft99}, {kTtft95}));  // a higher percentile of the same values
  EXPECT_TRUE(AtLeastAsStrict({SloGate{SloMetric::kTtft, 95, 900}}, {kTtft95}));
  EXPECT_FALSE(AtLeastAsStrict({kTtft95}, {kTtft95, kItl95}));
  EXPECT_FALSE(AtLeastAsStrict({kItl95}, {kTtft95}));
  EXPECT_FALSE(AtLeastAsStrict({SloGate{SloMetric::kTtft, 99, 1100}}, {kTtft95}));
  EXPECT_FALSE(AtLeastAsStrict({kTtft95}, {kTtft99}));
}

}  // namespace
}  // namespace capq
