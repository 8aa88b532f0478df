// A trial's load on two event loops (TrialOptions::loops): the same verdicts as on one, every
// stream on exactly one loop, each loop's figures in metrics.json, and `capq validate` re-derives
// the verdict from the merged evidence, an early decision's included.
#include <gtest/gtest.h>

#include <fstream>

#include "trial_test_util.h"

namespace capq::testing {
namespace {

nlohmann::json MetricsOf(const std::string& dir) {
  std::ifstream in(dir + "/metrics.json");
  return nlohmann::json::parse(in, nullptr, false);
}

void ExpectValidateAgrees(const std::string& dir, const TrialReport& rep) {
  Result<ValidateReport> v = ValidateTrialDir(dir);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->problems.empty()) << v->problems[0];
  EXPECT_EQ(v->verdict.outcome, rep.verdict.outcome);
}

// qualify_tiny's boundary is 6: C=6 passes and C=7 fails on one loop and on two.
TEST(TrialLoops, TwoLoopsKeepTheBoundaryAndEachLoopsFigures) {
  const Row row = QualifyTinyRow();
  const std::string dir = ScratchDir("loops");
  auto sim = StartSim(row);
  ASSERT_TRUE(sim);
  TrialOptions pass = Options(sim->url(), dir + "/c6", 6);
  pass.loops = 2;
  TrialReport at = RunTrial(row, pass);
  TrialOptions fail = Options(sim->url(), dir + "/c7", 7);
  fail.loops = 2;
  TrialReport above = RunTrial(row, fail);
  sim->Stop();

  ASSERT_EQ(at.verdict.outcome, TrialOutcome::kPass)
      << (at.verdict.reasons.empty() ? "" : at.verdict.reasons[0]);
  const nlohmann::json m = MetricsOf(dir + "/c6");
  ASSERT_TRUE(m.contains("load_loops")) << m.dump();
  ASSERT_EQ(m["load_loops"].size(), 2u);
  int streams = 0;
  for (const nlohmann::json& l : m["load_loops"]) {
    EXPECT_GT(l["streams"].get<int>(), 0) << l.dump();
    EXPECT_LE(l["peak_in_flight"].get<int>(), 3) << l.dump();  // C=6 dealt over two loops
    streams += l["streams"].get<int>();
  }
  EXPECT_EQ(streams, row.warmup.requests + row.measured.RequestsAt(6));
  ExpectValidateAgrees(dir + "/c6", at);

  ASSERT_EQ(above.verdict.outcome, TrialOutcome::kSloFail)
      << (above.verdict.reasons.empty() ? "" : above.verdict.reasons[0]);
  EXPECT_TRUE(above.verdict.correctness_pass);
  ASSERT_TRUE(above.verdict.decided);  // one loop's decision stopped both
  ExpectValidateAgrees(dir + "/c7", above);
}

}  // namespace
}  // namespace capq::testing
