// Early decision (early_decision.h): the moment a latency gate can no longer pass, from what is
// known of each measured request, and the same view rebuilt from decoded streams at a moment.
#include "capq/measurement/early_decision.h"

#include <gtest/gtest.h>

#include "capq/model/row_loader.h"

namespace capq {
namespace {

constexpr MonoNs kMs = 1'000'000;
// The allowance a waiting request's wait is reduced by (early_decision.cc): the loop's read lag.
constexpr MonoNs kAllowance = 50 * kMs;
constexpr MonoNs kT0 = 1000 * kMs;  // a send time (0 means not sent)

EarlyDecisionRules TtftRules(double below_ms, double percentile = 95) {
  EarlyDecisionRules r;
  r.enabled = true;
  r.gates = {SloGate{SloMetric::kTtft, percentile, below_ms}};
  r.min_completed = 0;  // the rule alone; the completions it waits for have a test of their own
  return r;
}

LiveLatency Known(MonoNs send, MonoNs ttft) {
  LiveLatency l;
  l.send_ns = send;
  l.first_token_ns = send + ttft;
  return l;
}

// 20 measured requests, p95 linear: 0.95 of the way from the 19th value to the 20th. With the
// 20th exactly at the bound, the percentile reaches it exactly when the 19th does.
TEST(EarlyDecision, AWaitingRequestDecidesTheMomentItsWaitReachesTheBound) {
  std::vector<LiveLatency> live(20);
  live[0] = Known(kT0, 1000 * kMs);  // one known at a 1,000 ms bound (which fails it)
  live[1].send_ns = kT0;             // one waiting since kT0
  const EarlyDecisionRules rules = TtftRules(1000);
  EXPECT_FALSE(DecideEarly(rules, live, kT0 + 1000 * kMs + kAllowance - kMs, kT0));
  std::optional<EarlyDecision> d = DecideEarly(rules, live, kT0 + 1000 * kMs + kAllowance, kT0);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->over, 2);
  EXPECT_EQ(d->waiting, 1);
  EXPECT_EQ(d->finished, 0);
  EXPECT_EQ(d->measured, 20);
  EXPECT_GE(d->lowest_reachable_ms, 1000);
  EXPECT_NE(d->Reason().find("p95 ttft cannot end below 1000.0 ms"), std::string::npos)
      << d->Reason();
}

TEST(EarlyDecision, KnownValuesUnderTheBoundDecideNothingWhileTheUnsentMayStillPass) {
  // Half sent, nine under the bound and one over; the other half may still come in at 0 ms, and
  // then the 19th and 20th values are 900 and 2,000 ms: p95 955 ms, below.
  std::vector<LiveLatency> live(20);
  for (int i = 0; i < 9; ++i) live[i] = Known(kT0, 900 * kMs);
  live[9] = Known(kT0, 2000 * kMs);
  EXPECT_FALSE(DecideEarly(TtftRules(1000), live, kT0 + 10'000 * kMs, kT0));
  // Once all are known, the same nine and one over decide nothing either; a second over does.
  for (int i = 10; i < 20; ++i) live[i] = Known(kT0, 900 * kMs);
  EXPECT_FALSE(DecideEarly(TtftRules(1000), live, kT0 + 10'000 * kMs, kT0));
  live[10] = Known(kT0, 2000 * kMs);
  EXPECT_TRUE(DecideEarly(TtftRules(1000), live, kT0 + 10'000 * kMs, kT0));
}

// A request that ended without a first token holds no place in the gate's percentile: with it
// gone, fewer values make the same misses a larger share.
TEST(EarlyDecision, ARequestEndedWithoutAValueLeavesThePercentile) {
  // p50 of five values is the third: two over a 1,000 ms bound and three unsent at 0 give 0...
  std::vector<LiveLatency> live(5);
  live[0] = Known(kT0, 3000 * kMs);
  live[1] = Known(kT0, 3000 * kMs);
  EXPECT_FALSE(DecideEarly(TtftRules(1000, 50), live, kT0, kT0));
  // ...but with one request failed, four values remain, and their p50 is halfway to 3,000 ms.
  live[2].send_ns = kT0;
  live[2].ended = true;
  EXPECT_TRUE(DecideEarly(TtftRules(1000, 50), live, kT0, kT0));
}

TEST(EarlyDecision, AnE2eGateCountsInFlightRequestsAtTheirWait) {
  EarlyDecisionRules rules = TtftRules(1000);
  rules.gates = {SloGate{SloMetric::kE2e, 95, 1000}};
  std::vector<LiveLatency> live(20);
  live[0] = Known(kT0, 10 * kMs);  // a first token early, still streaming
  live[1] = Known(kT0, 10 * kMs);
  EXPECT_FALSE(DecideEarly(rules, live, kT0 + 1000 * kMs, kT0));
  EXPECT_TRUE(DecideEarly(rules, live, kT0 + 1000 * kMs + kAllowance, kT0));
  // The same first tokens decide nothing on a TTFT gate.
  EXPECT_FALSE(DecideEarly(TtftRules(1000), live, kT0 + 1000 * kMs + kAllowance, kT0));
}

// A failing level's streams are proven correct too: no decision before `min_completed` of them
// completed, however certain the gate.
TEST(EarlyDecision, NoDecisionBeforeTheLevelsFirstStreamsCompleted) {
  EarlyDecisionRules rules = TtftRules(1000);
  rules.min_completed = 2;
  std::vector<LiveLatency> live(20);
  live[0] = Known(kT0, 3000 * kMs);
  live[1] = Known(kT0, 3000 * kMs);
  EXPECT_FALSE(DecideEarly(rules, live, kT0 + 3000 * kMs, kT0));
  live[0].ended = true;
  live[0].done_ns = kT0 + 3500 * kMs;
  EXPECT_FALSE(DecideEarly(rules, live, kT0 + 3500 * kMs, kT0));
  live[2].send_ns = kT0;
  live[2].ended = true;  // ended, but failed: it proves nothing
  EXPECT_FALSE(DecideEarly(rules, live, kT0 + 3500 * kMs, kT0));
  live[1].ended = true;
  live[1].done_ns = kT0 + 3600 * kMs;
  EXPECT_TRUE(DecideEarly(rules, live, kT0 + 3600 * kMs, kT0));
  const Row row;
  EXPECT_EQ(EarlyDecisionRulesFor(row, 7, false).min_completed, 7);
}

Row GateRow(const std::string& slo, const std::string& arrival = "{kind: closed_loop}",
            const std::string& extra = "") {
  const std::string yaml = R"(schema: capq/row/v1
id: ed
identity: {engine: sim, sim_profile: profiles/small.yaml, time_scale: 4}
workload:
  input_tokens: 64
  output_tokens: 16
  sampling: {temperature: 0, ignore_eos: true}
  arrival: )" + arrival + R"(
cache: {prefix_cache: enabled, flush_before_trial: true, verify_cold: true}
warmup: {requests: 1, concurrency: 1}
measured: {min_requests: 20, per_concurrency: 1}
slo:
)" + slo + extra + R"(trials: {count: 3, quiet_period_s: 0, seeds: [1, 2, 3]}
)";
  Result<Row> row = LoadRowFromString(yaml, std::string(CAPQ_SOURCE_DIR) + "/rows/sim/ed.yaml");
  EXPECT_TRUE(row.ok()) << row.status().ToString();
  return row.ok() ? *row : Row{};
}

TEST(EarlyDecision, TheRowSaysWhichGatesDecideAndWhenNone) {
  const Row both = GateRow(
      "  - {metric: ttft, percentile: 95, below_ms: 500}\n"
      "  - {metric: itl, percentile: 50, below_ms: 40}\n");
  EarlyDecisionRules r = EarlyDecisionRulesFor(both, 1, false);
  EXPECT_TRUE(r.enabled);
  ASSERT_EQ(r.gates.size(), 1u);  // an ITL gate is never decided by a wait
  EXPECT_EQ(r.gates[0].metric, SloMetric::kTtft);
  EXPECT_DOUBLE_EQ(r.time_scale, 4);

  EXPECT_FALSE(EarlyDecisionRulesFor(both, 1, true).enabled);
  EXPECT_NE(EarlyDecisionRulesFor(both, 1, true).off_reason.find("--full-trials"),
            std::string::npos);
  const Row itl_only = GateRow("  - {metric: itl, percentile: 50, below_ms: 40}\n");
  EXPECT_FALSE(EarlyDecisionRulesFor(itl_only, 1, false).enabled);
  const Row tiers =
      GateRow("  - {metric: ttft, percentile: 95, below_ms: 500}\n", "{kind: closed_loop}",
              "slo_tiers:\n  - name: loose\n    slo:\n"
              "      - {metric: ttft, percentile: 95, below_ms: 900}\n");
  EXPECT_FALSE(EarlyDecisionRulesFor(tiers, 1, false).enabled);
  EXPECT_NE(EarlyDecisionRulesFor(tiers, 1, false).off_reason.find("tiers"), std::string::npos);
}

// What a moment knew, from decoded streams: a first token read after it counts as waiting, a
// request sent after it as not sent, one that ended after it as in flight.
TEST(EarlyDecision, TheViewAtAMomentKnowsOnlyWhatWasReadByThen) {
  std::vector<RequestResult> rs(3);
  rs[0].start_ns = 100;
  rs[0].ttft_ns = 50;
  rs[0].first_token_arrival_ns = 160;  // read at 160 (stamped at 150)
  rs[0].end_ns = 300;
  rs[0].http_status = 200;
  rs[1].start_ns = 250;  // sent after the moment
  rs[2].start_ns = 100;  // ended by the moment, failed
  rs[2].end_ns = 180;
  rs[2].http_status = 500;
  std::vector<LiveLatency> at200 = LiveLatencyAt(rs, 200);
  EXPECT_EQ(at200[0].first_token_ns, 150);
  EXPECT_FALSE(at200[0].ended);
  EXPECT_EQ(at200[1].send_ns, 0);
  EXPECT_TRUE(at200[2].ended);
  EXPECT_EQ(at200[2].done_ns, 0);
  std::vector<LiveLatency> at155 = LiveLatencyAt(rs, 155);
  EXPECT_EQ(at155[0].send_ns, 100);
  EXPECT_EQ(at155[0].first_token_ns, 0);  // stamped at 150 but read at 160
  std::vector<LiveLatency> at400 = LiveLatencyAt(rs, 400);
  EXPECT_EQ(at400[0].done_ns, 300);
}

// The live view of several loops holds what each read, and one loop may have read a first token
// or an end after the moment another loop asks the rule at: the rule sees only what was read by
// then, as `capq validate` rebuilds it (LiveLatencyAt), or the two would disagree.
TEST(EarlyDecision, TheRuleAtAMomentIgnoresWhatWasReadAfterIt) {
  std::vector<LiveLatency> live(20);
  live[0] = Known(kT0, 2000 * kMs);  // one over a 1,000 ms bound, read long ago
  live[1] = Known(kT0, 3000 * kMs);  // a second over, read at its stamp: after the moment below
  live[1].first_token_read_ns = kT0 + 3000 * kMs;
  live[2] = Known(kT0, 10 * kMs);  // ended after the moment below
  live[2].ended = true;
  live[2].done_ns = live[2].end_ns = kT0 + 3000 * kMs;
  const MonoNs before = kT0 + 500 * kMs;
  EXPECT_FALSE(DecideEarly(TtftRules(1000), live, before, kT0));
  EXPECT_FALSE(live[2].SeenBy(before).ended);
  EXPECT_EQ(live[2].SeenBy(before).done_ns, 0);
  EXPECT_EQ(live[1].SeenBy(before).first_token_ns, 0);
  EXPECT_TRUE(DecideEarly(TtftRules(1000), live, kT0 + 3000 * kMs, kT0));
  EXPECT_EQ(live[1].SeenBy(kT0 - 1).send_ns, 0);  // not sent yet
}

TEST(EarlyDecision, ItsRecordReadsBackAsWritten) {
  std::vector<LiveLatency> live(20);
  live[0] = Known(kT0, 3000 * kMs);
  live[1] = Known(kT0, 3000 * kMs);
  live[1].ended = true;
  live[1].done_ns = 4000 * kMs;
  std::optional<EarlyDecision> d = DecideEarly(TtftRules(1000), live, 5000 * kMs, kT0);
  ASSERT_TRUE(d);
  EarlyDecision back = EarlyDecisionFromJson(EarlyDecisionToJson(*d));
  EXPECT_EQ(back.Reason(), d->Reason());
  EXPECT_EQ(back.at_ns, d->at_ns);
  EXPECT_DOUBLE_EQ(back.after_s, 4.0);
}

}  // namespace
}  // namespace capq
