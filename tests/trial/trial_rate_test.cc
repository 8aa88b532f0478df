// Open-loop trials against the simulator (issue 13): the CI rate row's own workload, at a rate its
// engine holds and at one it cannot, and with a schedule bound no client can keep.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "capq/measurement/raw_evidence.h"
#include "capq/model/plan.h"
#include "capq/model/row_loader.h"
#include "capq/record/capacity_data.h"
#include "trial_test_util.h"

namespace capq {
namespace {

using ::testing::HasSubstr;
using testing::Options;
using testing::ScratchDir;
using testing::StartSim;

// rows/sim/sim_small_rate.yaml, at twice its time scale to keep each trial short, with a schedule
// bound loose enough for a sanitizer build sharing two cores (the gates under test are the others).
Row RateRow(double max_send_lateness_ms = 50) {
  Result<Row> row = LoadRow(std::string(CAPQ_SOURCE_DIR) + "/rows/sim/sim_small_rate.yaml");
  EXPECT_TRUE(row.ok()) << row.status().ToString();
  if (!row.ok()) return Row{};
  row->identity.time_scale = 20;
  row->trials.quiet_period_s = 0;
  row->stability.max_send_lateness_ms = max_send_lateness_ms;
  return *row;
}

bool Has(const std::vector<std::string>& reasons, const std::string& prefix) {
  for (const auto& r : reasons) {
    if (r.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

TEST(RateTrial, BelowTheBoundarySendsOnScheduleAndPassesEveryStabilityGate) {
  const Row row = RateRow();
  const std::string dir = ScratchDir("rate-pass") + "/trial";
  auto sim = StartSim(row);
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrial(row, Options(sim->url(), dir, 1));  // 0.75 rps
  sim->Stop();
  ASSERT_EQ(rep.verdict.outcome, TrialOutcome::kPass)
      << (rep.verdict.reasons.empty() ? "" : rep.verdict.reasons[0]);
  ASSERT_TRUE(rep.verdict.stability);
  const StabilityVerdict& st = *rep.verdict.stability;
  EXPECT_TRUE(st.queue_bounded() && st.stationary() && st.schedule_held);
  EXPECT_TRUE(st.server_queue.known);  // the simulator's queue gauge was sampled during the load
  ASSERT_TRUE(rep.metrics);
  EXPECT_EQ(rep.metrics->requests, 150u);  // the ramp is sent but not measured

  // Every scheduled request left at its planned offset: intended send = schedule start + offset.
  Result<TrialPlan> plan = PlanFromJson(nlohmann::json::parse(std::ifstream(dir + "/plan.json")));
  ASSERT_TRUE(plan.ok());
  ASSERT_GT(plan->ramp_requests, 0);
  Result<RawEvidenceFile> raw = ReadRawRecords(dir + "/raw.jsonl");
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  std::vector<const RawRecord*> scheduled;
  for (const RawRecord& r : raw->records) {
    if (r.phase == Phase::kMeasured) scheduled.push_back(&r);
  }
  ASSERT_EQ(scheduled.size(), plan->measured.size());
  const MonoNs start = scheduled[0]->intended_send_ns;
  for (const RawRecord* r : scheduled) {
    const double want = static_cast<double>(plan->send_offsets_ns[static_cast<size_t>(r->index)] -
                                            plan->send_offsets_ns[0]) /
                        row.identity.time_scale;
    EXPECT_NEAR(static_cast<double>(r->intended_send_ns - start), want, 2) << r->id;
    EXPECT_GE(r->actual_send_ns, r->intended_send_ns) << r->id;
  }
  auto v = ValidateTrialDir(dir);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->problems.empty()) << v->problems[0];
  EXPECT_EQ(v->verdict.outcome, TrialOutcome::kPass);
  ASSERT_TRUE(v->verdict.stability);
  EXPECT_DOUBLE_EQ(v->verdict.stability->client_in_flight.last, st.client_in_flight.last);
}

TEST(RateTrial, AboveItTheQueueGrowsAndLatencyDriftsAndBothGatesSaySo) {
  const Row row = RateRow();
  const std::string dir = ScratchDir("rate-fail") + "/trial";
  auto sim = StartSim(row);
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrial(row, Options(sim->url(), dir, 2));  // 1.5 rps
  sim->Stop();
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kSloFail);
  EXPECT_TRUE(rep.verdict.correctness_pass);  // every stream was still correct
  ASSERT_TRUE(rep.verdict.stability);
  const StabilityVerdict& st = *rep.verdict.stability;
  EXPECT_FALSE(st.queue_bounded());
  EXPECT_GT(st.client_in_flight.last, st.client_in_flight.bound);
  EXPECT_TRUE(Has(rep.verdict.reasons, "queue_bounded: client in-flight last third"));
  EXPECT_TRUE(Has(rep.verdict.reasons, "queue_bounded: server queue last third"));
  // Waiting grows with the queue: the last third's TTFT is above the first's, and when by more
  // than the drift factor the stationarity gate says so too.
  ASSERT_EQ(st.latency.size(), 1u);
  EXPECT_GT(st.latency[0].last, st.latency[0].first);
  EXPECT_EQ(Has(rep.verdict.reasons, "stationary: ttft p95 last third"), !st.stationary());
  auto v = ValidateTrialDir(dir);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->verdict.outcome, TrialOutcome::kSloFail);
  // The misses carry their figures as data, to the summary qualification reads back.
  ASSERT_GE(rep.verdict.misses.size(), 2u);
  const GateMiss& client = rep.verdict.misses[0];
  EXPECT_EQ(client.gate, "queue_bounded");
  EXPECT_EQ(client.subject, "client in-flight");
  EXPECT_DOUBLE_EQ(client.value, st.client_in_flight.last);
  EXPECT_DOUBLE_EQ(client.bound, st.client_in_flight.bound);
  EXPECT_NE(std::find(rep.verdict.reasons.begin(), rep.verdict.reasons.end(), client.text),
            rep.verdict.reasons.end());
  Result<TrialSummary> summary = ReadTrialDir(dir);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  ASSERT_EQ(summary->misses.size(), rep.verdict.misses.size());
  EXPECT_DOUBLE_EQ(summary->misses[0].value, client.value);
  EXPECT_EQ(summary->misses[1].subject, "server queue");
}

// A bound no loop can keep stands in for a CPU-starved client: the trial could not run, whatever
// its latency (the load the row declares was not what the server got).
TEST(RateTrial, AClientThatFellBehindItsScheduleCouldNotRun) {
  const Row row = RateRow(/*max_send_lateness_ms=*/1e-6);
  const std::string dir = ScratchDir("rate-late") + "/trial";
  auto sim = StartSim(row);
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrial(row, Options(sim->url(), dir, 2));
  sim->Stop();
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kCouldNotRun);
  EXPECT_TRUE(Has(rep.verdict.reasons, "schedule_held: the client fell behind"));
  auto v = ValidateTrialDir(dir);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->verdict.outcome, TrialOutcome::kCouldNotRun);
}

}  // namespace
}  // namespace capq
