// The trial's decision (Decide) and the verdict it writes: every gate strictly below, correctness
// apart and first, and verdict.json's round trip.
#include <gtest/gtest.h>

#include <cmath>

#include "capq/record/verdict.h"
#include "capq/trial/trial.h"

namespace capq {
namespace {

Row GateRow(double below_ms) {
  Row row;
  row.id = "r";
  row.slo = {{SloMetric::kTtft, 95, below_ms}};
  return row;
}

CorrectnessReport AllPass() {
  CorrectnessReport c;
  c.gates.push_back({"status_200", true, true, "ok", {}});
  return c;
}

TrialMetrics WithTtft(std::vector<double> v) {
  TrialMetrics m;
  m.ttft_values_ms = v;
  m.ttft_ms = Summarize(v, PercentileMethod::kLinear);
  return m;
}

TEST(Decide, EveryGateIsStrictlyBelow) {
  TrialMetrics m = WithTtft(std::vector<double>(20, 100.0));
  EXPECT_EQ(Decide(GateRow(100.0001), m, AllPass()).outcome, TrialOutcome::kPass);
  TrialVerdict equal = Decide(GateRow(100), m, AllPass());
  EXPECT_EQ(equal.outcome, TrialOutcome::kSloFail);
  ASSERT_EQ(equal.reasons.size(), 1u);
  EXPECT_EQ(equal.reasons[0], "p95 ttft 100.0 ms is not below 100.0 ms");
  TrialVerdict none = Decide(GateRow(100), WithTtft({}), AllPass());
  EXPECT_EQ(none.outcome, TrialOutcome::kSloFail);
  EXPECT_NE(none.reasons[0].find("nothing measured"), std::string::npos);
}

TEST(Decide, CorrectnessIsSeparateAndWins) {
  CorrectnessReport bad = AllPass();
  bad.gates.push_back({"unique_outputs", true, false, "2 of 20 outputs repeat: m3, m4", {"m3"}});
  TrialVerdict v = Decide(GateRow(50), WithTtft(std::vector<double>(20, 100.0)), bad);
  EXPECT_EQ(v.outcome, TrialOutcome::kCorrectnessFail);
  EXPECT_EQ(v.ExitCode(), 2);
  EXPECT_FALSE(v.latency_pass);
  EXPECT_FALSE(v.correctness_pass);
  EXPECT_EQ(v.reasons.back(), "unique_outputs: 2 of 20 outputs repeat: m3, m4");
  // A gate the row switched off does not fail the trial.
  bad.gates.back().enabled = false;
  EXPECT_EQ(Decide(GateRow(500), WithTtft(std::vector<double>(20, 100.0)), bad).outcome,
            TrialOutcome::kPass);
  EXPECT_EQ(Decide(GateRow(500), WithTtft(std::vector<double>(20, 1.0)), {}).outcome,
            TrialOutcome::kCorrectnessFail);  // no gates evaluated: fail closed
}

TEST(Decide, AFailFastStopIsACorrectnessFailureNamedFirst) {
  StreamBreak stop{"zero_errors", "m12", false, "event #3 at +41.0 ms: error frame: boom"};
  TrialVerdict v = Decide(GateRow(500), WithTtft(std::vector<double>(20, 100.0)), AllPass(), stop);
  EXPECT_EQ(v.outcome, TrialOutcome::kCorrectnessFail);
  EXPECT_EQ(v.ExitCode(), 2);
  EXPECT_FALSE(v.correctness_pass);
  EXPECT_FALSE(v.latency_pass) << "a cut-short sample is no SLO pass";
  ASSERT_FALSE(v.reasons.empty());
  EXPECT_EQ(v.reasons[0],
            "stopped at the first broken stream: zero_errors on m12: event #3 at +41.0 ms: "
            "error frame: boom");
  ASSERT_TRUE(v.stopped_at);
  EXPECT_EQ(v.stopped_at->request_id, "m12");

  nlohmann::json j = VerdictToJson(v, VerdictContext{});
  EXPECT_EQ(j["fail_fast"]["gate"], "zero_errors");
  EXPECT_EQ(j["fail_fast"]["request"], "m12");
  auto back = VerdictFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->verdict.stopped_at);
  EXPECT_EQ(back->verdict.stopped_at->Reason(), v.reasons[0]);
}

TEST(Verdict, OutcomeNamesAndExitCodes) {
  TrialVerdict v;
  const std::pair<TrialOutcome, int> cases[] = {{TrialOutcome::kPass, 0},
                                                {TrialOutcome::kSloFail, 1},
                                                {TrialOutcome::kCorrectnessFail, 2},
                                                {TrialOutcome::kCouldNotRun, 3},
                                                {TrialOutcome::kInterrupted, 130}};
  for (auto [o, code] : cases) {
    v.outcome = o;
    EXPECT_EQ(v.ExitCode(), code);
    EXPECT_EQ(*ParseTrialOutcome(TrialOutcomeName(o)), o);
  }
  EXPECT_FALSE(ParseTrialOutcome("green").ok());
}

// Every SLO gate states how sure its verdict is, from the trial's own requests: a pass as the
// confidence that the true percentile is below the bound, a fail as the confidence that it is at
// or above it, with the requests a 0.95 claim would need; verdict.json keeps it.
TEST(Decide, EveryGateCarriesTheConfidenceOfItsSide) {
  std::vector<double> v(100, 100.0);
  for (int i = 0; i < 3; ++i) v[i] = 900.0;  // 3 of 100 at or over 500 ms
  TrialVerdict pass = Decide(GateRow(500), WithTtft(v), AllPass());
  ASSERT_EQ(pass.outcome, TrialOutcome::kPass);
  const GateConfidence& c = pass.slo[0].confidence;
  EXPECT_EQ(c.requests, 100);
  EXPECT_EQ(c.over, 3);
  EXPECT_TRUE(c.pass_side);
  EXPECT_DOUBLE_EQ(c.confidence, PassConfidence(100, 3, 95));
  EXPECT_EQ(c.requests_needed, RequestsForPassClaim(3, 95, kStatedConfidence));
  for (int i = 3; i < 12; ++i) v[i] = 900.0;  // 12 of 100 over: the p95 is 900 ms
  TrialVerdict fail = Decide(GateRow(500), WithTtft(v), AllPass());
  ASSERT_EQ(fail.outcome, TrialOutcome::kSloFail);
  const GateConfidence& f = fail.slo[0].confidence;
  EXPECT_FALSE(f.pass_side);
  EXPECT_EQ(f.over, 12);
  EXPECT_DOUBLE_EQ(f.confidence, FailConfidence(100, 12, 95));
  EXPECT_GT(f.confidence, 0.99);
  auto back = VerdictFromJson(VerdictToJson(fail, VerdictContext{}));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  const GateConfidence& r = back->verdict.slo[0].confidence;
  EXPECT_EQ(r.requests, 100);
  EXPECT_EQ(r.over, 12);
  EXPECT_FALSE(r.pass_side);
  EXPECT_DOUBLE_EQ(r.confidence, f.confidence);
  EXPECT_EQ(r.requests_needed, f.requests_needed);
  // Nothing measured: no confidence, and no words for one.
  TrialVerdict none = Decide(GateRow(500), WithTtft({}), AllPass());
  EXPECT_TRUE(std::isnan(none.slo[0].confidence.confidence));
  EXPECT_EQ(ConfidenceText(none.slo[0].confidence), "");
}

TEST(Verdict, JsonRoundTripKeepsTheFieldsReadersUse) {
  TrialVerdict v = Decide(GateRow(50), WithTtft(std::vector<double>(20, 100.0)), AllPass());
  VerdictContext ctx;
  ctx.row_id = "r";
  ctx.level = 7;
  ctx.trial_index = 2;
  ctx.seed = 202;
  ctx.phase = QualifyPhase::kConfirm;
  ctx.time_scale = 10;
  ctx.started_utc = "2026-11-29T12:00:00.000Z";
  nlohmann::json j = VerdictToJson(v, ctx);
  for (const char* key : {"schema", "row_id", "concurrency", "trial", "seed", "phase", "outcome",
                          "exit_code", "latency_pass", "correctness_pass", "slo", "correctness",
                          "reasons", "time_scale", "started_utc", "complete"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["outcome"], "slo_fail");
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_EQ(j["slo"][0]["metric"], "ttft");
  EXPECT_EQ(j["slo"][0]["measured_ms"], 100.0);
  auto back = VerdictFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->verdict.outcome, TrialOutcome::kSloFail);
  EXPECT_EQ(back->context.seed, 202u);
  EXPECT_DOUBLE_EQ(back->verdict.slo[0].measured_ms, 100.0);
  j.erase("outcome");
  EXPECT_FALSE(VerdictFromJson(j).ok());
}

}  // namespace
}  // namespace capq
