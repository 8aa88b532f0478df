// Fail fast: the first measured stream that can no longer pass a gate ends the trial within
// seconds, whatever the request timeout; the stop is re-derived by `capq validate`, and a row can
// switch it off. An interrupt stays an interrupt.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "../trial/trial_test_util.h"
#include "capq/clock.h"
#include "capq/measurement/loadgen.h"
#include "capq/measurement/raw_evidence.h"
#include "capq/qualify/qualify.h"
#include "capq/record/capacity_data.h"

namespace capq::testing {
namespace {

struct RawFile {
  nlohmann::json header;  // the "end" line
  std::vector<RawRecord> measured;
};

// The measured records and the evidence's last line (its load times and fail-fast header).
RawFile ReadRaw(const std::string& path) {
  RawFile f;
  Result<RawEvidenceFile> raw = ReadRawRecords(path);
  EXPECT_TRUE(raw.ok()) << raw.status().ToString();
  if (!raw.ok()) return f;
  f.header = raw->summary.end;
  for (RawRecord& r : raw->records) {
    if (r.phase == Phase::kMeasured) f.measured.push_back(std::move(r));
  }
  return f;
}

int Sent(const RawFile& f) {
  int n = 0;
  for (const auto& r : f.measured) n += r.actual_send_ns != 0;
  return n;
}

std::string FirstReason(const TrialVerdict& v) {
  return v.reasons.empty() ? std::string() : v.reasons.front();
}

// `capq validate` re-derives the same outcome and the same first reason from the evidence.
void ExpectValidateAgrees(const std::string& dir, const TrialVerdict& was) {
  auto v = ValidateTrialDir(dir);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->problems.empty()) << v->problems.front();
  EXPECT_TRUE(v->complete);
  EXPECT_EQ(v->verdict.outcome, was.outcome) << FirstReason(v->verdict);
  EXPECT_EQ(FirstReason(v->verdict), FirstReason(was));
}

TEST(TrialFailFast, StallEndsASixHourTimeoutTrialInSeconds) {
  SimRowSpec spec;
  // x10 and 256 tokens: the other slot is still streaming when the stall bound (10 virtual
  // seconds, 1 wall second) cuts; the request timeout is 2160 wall seconds.
  spec.time_scale = 10;
  spec.output_tokens = 256;
  spec.request_timeout_s = 21600;
  spec.correctness = "correctness: {stall_timeout_s: 10}\n";
  Row row = MakeSimRow(spec);
  std::string dir = ScratchDir("ff-stall");
  // Arrivals 0-1 are the warm-ups; 5 is a measured request of the C=2 burst.
  std::string faults = WriteText(dir + "/faults.yaml",
                                 "faults:\n  - {kind: stall, after_tokens: 3, requests: [5]}\n");
  auto sim = StartSim(row, faults);
  ASSERT_TRUE(sim);
  const MonoNs start = NowNs();
  TrialReport rep = RunTrial(row, Options(sim->url(), dir + "/trial", 2));
  const double wall_s = NsToS(NowNs() - start);
  sim->Stop();
  std::cout << "[ fail fast ] stalled trial took " << wall_s << " s of wall time\n";
  EXPECT_LT(wall_s, 10.0);
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kCorrectnessFail) << FirstReason(rep.verdict);
  EXPECT_EQ(rep.verdict.ExitCode(), 2);

  RawFile raw = ReadRaw(dir + "/trial/raw.jsonl");
  std::string stalled;
  int completed = 0, harness_cut = 0;
  for (const auto& r : raw.measured) {
    if (r.stalled) stalled = r.id;
    completed += r.http_status == 200 && !r.cancelled;
  }
  ASSERT_FALSE(stalled.empty()) << "no record is marked stalled";
  for (const auto& r : raw.measured)
    harness_cut += r.cancelled_by_harness == "fail_fast after " + stalled;
  EXPECT_EQ(raw.header["fail_fast"]["stopped_by"], stalled) << raw.header.dump();
  EXPECT_GE(completed, 2) << "the streams finished before the stall are kept";
  EXPECT_GT(harness_cut, 0) << "the rest is marked as cut by the harness";
  EXPECT_LT(Sent(raw), 20) << "no request may start after the stop";

  const std::string first = FirstReason(rep.verdict);
  EXPECT_EQ(
      first.rfind(
          "stopped at the first broken stream: no_cancellations on " + stalled + ": stalled ", 0),
      0u)
      << first;
  ASSERT_TRUE(rep.verdict.stopped_at);
  EXPECT_EQ(rep.verdict.stopped_at->request_id, stalled);
  // Only the stalled stream is the server's cancellation.
  const GateResult* g = Gate(rep.verdict, "no_cancellations");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->offending_ids, std::vector<std::string>{stalled}) << g->evidence;
  EXPECT_NE(g->evidence.find("(stalled)"), std::string::npos) << g->evidence;
  EXPECT_NE(g->evidence.find("by the harness (fail_fast after " + stalled + ")"), std::string::npos)
      << g->evidence;
  ExpectValidateAgrees(dir + "/trial", rep.verdict);
}

TEST(TrialFailFast, ErrorFrameStopsTheTrialBeforeEveryRequestIsSent) {
  // At x1 a request takes ~0.14 s of wall time, so a checker thread slowed by a loaded machine
  // still stops the trial within a few requests; at x100 (under 1 ms each) a dozen could slip by.
  SimRowSpec spec;
  spec.time_scale = 1;
  spec.output_tokens = 32;
  Row row = MakeSimRow(spec);
  std::string dir = ScratchDir("ff-error-frame");
  // Arrival 4 is m2 at C=1.
  std::string faults = WriteText(
      dir + "/faults.yaml", "faults:\n  - {kind: error_frame, after_tokens: 3, requests: [4]}\n");
  auto sim = StartSim(row, faults);
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrial(row, Options(sim->url(), dir + "/trial"));
  sim->Stop();
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kCorrectnessFail) << FirstReason(rep.verdict);
  EXPECT_EQ(rep.verdict.ExitCode(), 2);
  const std::string first = FirstReason(rep.verdict);
  EXPECT_EQ(first.rfind("stopped at the first broken stream: zero_errors on m2: ", 0), 0u) << first;
  EXPECT_NE(first.find("error frame"), std::string::npos) << first;

  RawFile raw = ReadRaw(dir + "/trial/raw.jsonl");
  // m0, m1 and the broken m2, plus whatever took m2's slot while its record was being checked on
  // the checker thread (one request on a quick build; a sanitizer build checks slower). Each of
  // those either finished or was cut by the harness; everything after was never sent.
  EXPECT_GE(Sent(raw), 3);
  EXPECT_LE(Sent(raw), 8) << "the trial must stop long before its 20 measured requests";
  ASSERT_EQ(raw.measured.size(), 20u);
  bool cut_or_unsent_seen = false;
  for (size_t i = 3; i < raw.measured.size(); ++i) {
    const std::string& by = raw.measured[i].cancelled_by_harness;
    if (by.empty()) {
      EXPECT_FALSE(cut_or_unsent_seen) << raw.measured[i].id << " was sent after the stop";
      continue;
    }
    cut_or_unsent_seen = true;
    EXPECT_EQ(by, "fail_fast after m2") << raw.measured[i].id;
  }
  EXPECT_EQ(raw.measured.back().transport_error, "not sent: fail_fast after m2");
  // The requests never sent are the harness's doing, not cancellations by the server.
  const GateResult* g = Gate(rep.verdict, "no_cancellations");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->passed) << g->evidence;
  const GateResult* z = Gate(rep.verdict, "zero_errors");
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(z->offending_ids, std::vector<std::string>{"m2"}) << z->evidence;
  ExpectValidateAgrees(dir + "/trial", rep.verdict);

  // capq qualify stops there, naming the gate and the request that broke.
  Result<TrialSummary> summary = ReadTrialDir(dir + "/trial");
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  ASSERT_FALSE(summary->failed_gates.empty());
  EXPECT_EQ(summary->failed_gates.front().name, "zero_errors");
  EXPECT_EQ(
      summary->failed_gates.front().evidence.rfind("stopped at the first broken stream m2", 0), 0u)
      << summary->failed_gates.front().Text();
  RowQualification q = Qualify(
      row, [&](const Row&, const TrialRequest&) { return *summary; }, QualifyOptions{});
  EXPECT_EQ(q.status, QualifyStatus::kCorrectnessFail);
  // The gate that stopped the trial first; the other gates m2 itself broke after it.
  EXPECT_EQ(q.failed_gate.rfind("zero_errors", 0), 0u) << q.failed_gate;
  EXPECT_EQ(q.message.rfind("correctness gate zero_errors", 0), 0u) << q.message;
  EXPECT_NE(q.message.find("stopped at the first broken stream: zero_errors on m2"),
            std::string::npos)
      << q.message;
}

TEST(TrialFailFast, ABrokenCalibrationWarmUpStopsBeforeTheMeasuredBurst) {
  Row row = MakeSimRow({});
  std::string dir = ScratchDir("ff-calibration");
  std::string faults = WriteText(
      dir + "/faults.yaml", "faults:\n  - {kind: error_frame, after_tokens: 3, requests: [0]}\n");
  auto sim = StartSim(row, faults);
  ASSERT_TRUE(sim);
  TrialOptions o = Options(sim->url(), dir + "/trial");
  o.ignore_tokenize_endpoint = true;  // w0 and w1 calibrate prompt lengths first
  TrialReport rep = RunTrial(row, o);
  sim->Stop();
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kCorrectnessFail) << FirstReason(rep.verdict);
  EXPECT_EQ(FirstReason(rep.verdict)
                .rfind("stopped at the first broken stream: zero_errors on w0 (warm-up): ", 0),
            0u)
      << FirstReason(rep.verdict);
  RawFile raw = ReadRaw(dir + "/trial/raw.jsonl");
  ASSERT_EQ(raw.measured.size(), 20u);
  EXPECT_EQ(Sent(raw), 0);
  for (const auto& r : raw.measured) EXPECT_EQ(r.cancelled_by_harness, "fail_fast after w0");
  // w1 only if it took w0's slot while w0 was being checked; nothing after it.
  EXPECT_LE(sim->requests_received(), 2);
  ExpectValidateAgrees(dir + "/trial", rep.verdict);
}

TEST(TrialFailFast, ARowThatSwitchesItOffRunsEveryRequest) {
  SimRowSpec spec;
  spec.correctness =
      "correctness:\n  fail_fast: {enabled: false, reason: \"collect every broken stream\"}\n";
  Row row = MakeSimRow(spec);
  ASSERT_FALSE(row.correctness.fail_fast.enabled);
  std::string dir = ScratchDir("ff-off");
  std::string faults = WriteText(
      dir + "/faults.yaml", "faults:\n  - {kind: error_frame, after_tokens: 3, requests: [4]}\n");
  auto sim = StartSim(row, faults);
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrial(row, Options(sim->url(), dir + "/trial"));
  sim->Stop();
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kCorrectnessFail) << FirstReason(rep.verdict);
  EXPECT_FALSE(rep.verdict.stopped_at);
  for (const auto& r : rep.verdict.reasons) {
    EXPECT_EQ(r.find("stopped at the first broken stream"), std::string::npos) << r;
  }
  RawFile raw = ReadRaw(dir + "/trial/raw.jsonl");
  EXPECT_EQ(Sent(raw), 20);
  EXPECT_TRUE(raw.header["fail_fast"]["stopped_by"].is_null()) << raw.header.dump();
  EXPECT_EQ(raw.header["fail_fast"]["enabled"], false);
  const GateResult* z = Gate(rep.verdict, "zero_errors");
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(z->offending_ids, std::vector<std::string>{"m2"}) << z->evidence;
  ExpectValidateAgrees(dir + "/trial", rep.verdict);
}

TEST(TrialFailFast, AnInterruptIsReportedAsAnInterruptionNotAsFailFast) {
  SimRowSpec spec;
  spec.time_scale = 10;
  spec.min_requests = 40;
  Row row = MakeSimRow(spec);
  ASSERT_TRUE(row.correctness.fail_fast.enabled);
  std::string dir = ScratchDir("ff-interrupt");
  auto sim = StartSim(row);
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrialInterruptedAfter(row, *sim, dir + "/trial", 10);
  sim->Stop();
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kInterrupted) << FirstReason(rep.verdict);
  EXPECT_EQ(rep.verdict.ExitCode(), 130);
  EXPECT_FALSE(rep.verdict.stopped_at);
  EXPECT_EQ(FirstReason(rep.verdict).rfind("interrupted: ", 0), 0u) << FirstReason(rep.verdict);
  RawFile raw = ReadRaw(dir + "/trial/raw.jsonl");
  EXPECT_TRUE(raw.header["fail_fast"]["stopped_by"].is_null()) << raw.header.dump();
  EXPECT_EQ(raw.header["interrupted"], true);
  for (const auto& r : raw.measured) {
    EXPECT_TRUE(r.cancelled_by_harness.empty()) << r.id << ": " << r.cancelled_by_harness;
  }
  auto v = ValidateTrialDir(dir + "/trial");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->verdict.outcome, TrialOutcome::kInterrupted);
}

}  // namespace
}  // namespace capq::testing
