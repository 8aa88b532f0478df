// A trial stops once its verdict is certain (early_decision.h): on the simulator, the qualify test
// row at C=7 (one above its boundary) decides early, says which gate and when, marks what it cut
// as the harness's, and `capq validate` re-derives the decision from the raw records alone; with
// --full-trials the same trial runs whole to the same outcome.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "trial_test_util.h"

namespace capq::testing {
namespace {

std::vector<nlohmann::json> MeasuredResults(const std::string& dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(dir + "/results.jsonl");
  for (std::string line; std::getline(in, line);) {
    nlohmann::json r = nlohmann::json::parse(line);
    if (r["phase"] == "measured") out.push_back(std::move(r));
  }
  return out;
}

TEST(TrialEarlyDecision, AFailingLevelStopsOnceCertainAndValidateAgrees) {
  const Row row = QualifyTinyRow();
  const std::string dir = ScratchDir("early");
  auto sim = StartSim(row);
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrial(row, Options(sim->url(), dir + "/decided", 7));
  TrialOptions full = Options(sim->url(), dir + "/full", 7);
  full.full_trials = true;
  TrialReport whole = RunTrial(row, full);
  sim->Stop();

  ASSERT_EQ(rep.verdict.outcome, TrialOutcome::kSloFail) << rep.verdict.reasons[0];
  EXPECT_TRUE(rep.verdict.correctness_pass);
  ASSERT_TRUE(rep.verdict.decided);
  EXPECT_NE(rep.verdict.reasons[0].find("decided early: p95 ttft cannot end below 1400.0 ms"),
            std::string::npos)
      << rep.verdict.reasons[0];
  ASSERT_EQ(rep.verdict.slo.size(), 1u);
  EXPECT_TRUE(rep.verdict.slo[0].at_least);
  EXPECT_GE(rep.verdict.slo[0].measured_ms, 1400);
  // What was in flight or unsent is the harness's, never a server failure.
  int cut = 0;
  for (const nlohmann::json& r : MeasuredResults(dir + "/decided")) {
    cut += r["cancelled_by_harness"] == kDecidedEarlyCut ? 1 : 0;
  }
  EXPECT_GT(cut, 0);
  EXPECT_EQ(cut, rep.verdict.decided->measured - rep.verdict.decided->finished);

  Result<ValidateReport> v = ValidateTrialDir(dir + "/decided");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->problems.empty()) << v->problems[0];
  EXPECT_EQ(v->verdict.outcome, TrialOutcome::kSloFail);
  ASSERT_TRUE(v->verdict.decided);
  EXPECT_EQ(v->verdict.decided->Reason(), rep.verdict.decided->Reason());

  // The same level run whole: the same outcome, every request measured, no decision.
  EXPECT_EQ(whole.verdict.outcome, TrialOutcome::kSloFail);
  EXPECT_FALSE(whole.verdict.decided);
  EXPECT_FALSE(whole.verdict.slo[0].at_least);
  // The bound held: the whole run's percentile is not below it (two runs of the same seeded
  // simulator, a fraction of a millisecond of timing apart).
  EXPECT_GE(whole.verdict.slo[0].measured_ms, rep.verdict.slo[0].measured_ms * 0.99);
  for (const nlohmann::json& r : MeasuredResults(dir + "/full")) {
    EXPECT_EQ(r["cancelled_by_harness"], "") << r["id"];
  }
}

// A decision the records do not bear out is no verdict: the recorded moment moved earlier than
// any gate was certain makes validate say so, and the trial cannot count as a failure.
TEST(TrialEarlyDecision, ADecisionTheRecordsDoNotBearOutIsAProblem) {
  const Row row = QualifyTinyRow();
  const std::string dir = ScratchDir("early-tamper");
  auto sim = StartSim(row);
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrial(row, Options(sim->url(), dir + "/t", 7));
  sim->Stop();
  ASSERT_TRUE(rep.verdict.decided);
  const std::string raw = dir + "/t/raw.jsonl";
  std::ifstream in(raw);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string at = "\"at_ns\":" + std::to_string(rep.verdict.decided->at_ns);
  const size_t pos = text.rfind(at);
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, at.size(), "\"at_ns\":1");
  std::ofstream(raw, std::ios::trunc) << text;

  Result<ValidateReport> v = ValidateTrialDir(dir + "/t");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  bool named = false;
  for (const std::string& p : v->problems) {
    named = named || p.find("do not show every gate's pass ruled out") != std::string::npos;
  }
  EXPECT_TRUE(named) << (v->problems.empty() ? "" : v->problems.back());
  EXPECT_EQ(v->verdict.outcome, TrialOutcome::kCouldNotRun);
}

}  // namespace
}  // namespace capq::testing
