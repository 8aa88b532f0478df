// A broken server never yields a green trial, and never a hung one: `capq trial` as a process
// against `capq sim` as a process that is killed, hangs, refuses or is never ready.
#include <gtest/gtest.h>

#include "process_util.h"

namespace capq::reliability {
namespace {

// `capq validate DIR` must never call a directory good unless the test says it is complete.
void ExpectValidateNeverPasses(const std::string& dir, const std::string& log_prefix) {
  RunResult v = RunProcess({Exe(), "validate", dir}, log_prefix, 60);
  EXPECT_NE(v.exit_code, 0) << v.out << v.err;
  EXPECT_FALSE(Contains(v.out, "re-derived verdict: pass")) << v.out;
  EXPECT_TRUE(Contains(v.out, "incomplete")) << v.out << v.err;
}

TEST(ServerFaults, KilledServerEndsTheTrialWithServerLostAndKeepsCompletedRecords) {
  const std::string dir = Scratch("killed");
  SimProcess sim = StartSim(dir, 1);
  ASSERT_FALSE(sim.url.empty());
  auto trial =
      Child::Start(TrialArgv("rel_slow.yaml", sim.url, dir + "/trial", {"--setup-timeout", "20"}),
                   dir + "/trial.out", dir + "/trial.err");
  ASSERT_TRUE(trial);
  // 16 output tokens per request: 2 warm-up + at least 6 measured requests generated.
  ASSERT_TRUE(WaitForGeneratedTokens(sim.port, 16 * 8, 60)) << trial->Out() << trial->Err();
  ASSERT_FALSE(trial->WaitFor(0)) << "the trial ended before the kill: " << trial->Out();
  sim.child->Signal(SIGKILL);
  const double killed_at = WallS();
  ASSERT_TRUE(sim.child->WaitFor(10));

  auto code = trial->WaitFor(60);
  ASSERT_TRUE(code) << "capq trial hangs after its server died";
  // rel_slow's request timeout is 5 wall seconds; the final liveness probe is bounded by 2 s.
  const double after_kill_s = trial->EndedAtS() - killed_at;
  EXPECT_LT(after_kill_s, 5.0 + 2.0 + 3.0) << "the trial outlived the request timeout";
  EXPECT_EQ(*code, 3) << trial->Out() << trial->Err();
  const std::string out = trial->Out();
  EXPECT_TRUE(Contains(out, "server lost")) << out;
  EXPECT_TRUE(Contains(out, "verdict: could_not_run")) << out;
  EXPECT_FALSE(Contains(out, "verdict: pass")) << out;

  const int kept = CompletedMeasuredRecords(dir + "/trial/raw.jsonl");
  EXPECT_GE(kept, 5) << "requests completed before the kill must be in raw.jsonl";
  EXPECT_LT(kept, 40) << "the server died: not every measured request can have completed";

  nlohmann::json v = ReadJson(dir + "/trial/verdict.json");
  EXPECT_EQ(v.value("outcome", ""), "could_not_run") << v.dump(1);
  EXPECT_EQ(v.value("exit_code", -1), 3);
  EXPECT_EQ(v.value("complete", true), false);
  // Nothing green: a latency figure over the requests that happened to finish before the server
  // died is no SLO pass.
  EXPECT_EQ(v.value("latency_pass", true), false) << "latency_pass in a could_not_run verdict";
  EXPECT_EQ(v.value("correctness_pass", true), false);
  ASSERT_TRUE(v.contains("reasons") && !v["reasons"].empty());
  EXPECT_TRUE(Contains(v["reasons"][0].get<std::string>(), "server lost")) << v["reasons"];
  ExpectValidateNeverPasses(dir + "/trial", dir + "/validate");
}

// With fail fast off, a request the server never finishes is cut by the request timeout,
// counted as cancelled, and the no_cancellations gate fails with that request named.
void ExpectHungRequestIsCancelled(const std::string& name, const std::string& faults) {
  const std::string dir = Scratch(name);
  SimProcess sim = StartSim(dir, 100, DataPath("faults/" + faults));
  ASSERT_FALSE(sim.url.empty());
  RunResult r = RunProcess(TrialArgv("rel_fast_keep_going.yaml", sim.url, dir + "/trial"),
                           dir + "/trial", 90);
  ASSERT_FALSE(r.timed_out) << "capq trial hangs on a hung request";
  // rel_fast: 22 requests of ~60 ms and one cut at the 2 s request timeout.
  EXPECT_LT(r.wall_s, 45) << r.out;
  EXPECT_EQ(r.exit_code, 2) << "a cancelled request is a correctness failure\n" << r.out << r.err;
  EXPECT_FALSE(Contains(r.out, "verdict: pass")) << r.out;

  nlohmann::json v = ReadJson(dir + "/trial/verdict.json");
  EXPECT_EQ(v.value("outcome", ""), "correctness_fail") << v.dump(1);
  EXPECT_EQ(v.value("correctness_pass", true), false);
  const nlohmann::json* gate = FindGate(v, "no_cancellations");
  ASSERT_NE(gate, nullptr) << v.dump(1);
  EXPECT_EQ(gate->value("passed", true), false) << gate->dump();
  ASSERT_TRUE(gate->contains("offending_ids"));
  EXPECT_EQ((*gate)["offending_ids"].size(), 1u) << gate->dump();
  EXPECT_TRUE(Contains(gate->value("evidence", ""), "1 of 20")) << gate->dump();
  bool reason_names_gate = false;
  for (const auto& why : v["reasons"]) {
    reason_names_gate |= Contains(why.get<std::string>(), "no_cancellations");
  }
  EXPECT_TRUE(reason_names_gate) << v["reasons"];

  // The raw record of that request says it timed out.
  int timed_out = 0;
  Result<RawEvidenceFile> raw = ReadRawRecords(dir + "/trial/raw.jsonl");
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  for (const RawRecord& r : raw->records) timed_out += r.timed_out;
  EXPECT_EQ(timed_out, 1);
}

TEST(ServerFaults, StallMidStreamIsCutByTheRequestTimeout) {
  ExpectHungRequestIsCancelled("stall", "stall_measured.yaml");
}

TEST(ServerFaults, NoFirstByteIsCutByTheRequestTimeout) {
  ExpectHungRequestIsCancelled("slow-first-byte", "slow_first_byte_beyond_timeout.yaml");
}

// Fail fast: a stalled stream ends a trial whose requests may take six hours within seconds,
// with the stalled request named first, the streams before it kept and the rest marked as the
// harness's; `capq validate` re-derives the same verdict from the directory.
TEST(ServerFaults, StallStopsASixHourTimeoutTrialWithinSeconds) {
  const std::string dir = Scratch("fail-fast-stall");
  SimProcess sim = StartSim(dir, 100, DataPath("faults/stall_measured.yaml"));
  ASSERT_FALSE(sim.url.empty());
  RunResult r =
      RunProcess(TrialArgv("rel_long_timeout.yaml", sim.url, dir + "/trial"), dir + "/trial", 120);
  ASSERT_FALSE(r.timed_out) << "capq trial waits for the request timeout";
  EXPECT_LT(r.wall_s, 10.0) << r.out;
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;

  nlohmann::json v = ReadJson(dir + "/trial/verdict.json");
  EXPECT_EQ(v.value("outcome", ""), "correctness_fail") << v.dump(1);
  EXPECT_EQ(v.value("complete", false), true);
  ASSERT_TRUE(v.contains("reasons") && !v["reasons"].empty()) << v.dump(1);
  const std::string first = v["reasons"][0].get<std::string>();
  EXPECT_EQ(first.rfind("stopped at the first broken stream: no_cancellations on m2: stalled ", 0),
            0u)
      << first;
  EXPECT_EQ(v["fail_fast"].value("request", ""), "m2") << v.dump(1);

  int completed = 0, by_harness = 0, stalled = 0;
  Result<RawEvidenceFile> raw = ReadRawRecords(dir + "/trial/raw.jsonl");
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  EXPECT_EQ(raw->summary.end["fail_fast"].value("stopped_by", ""), "m2") << raw->summary.end;
  for (const RawRecord& r : raw->records) {
    if (r.phase != Phase::kMeasured) continue;
    completed += r.http_status == 200 && !r.cancelled;
    stalled += r.stalled;
    by_harness += r.cancelled_by_harness == "fail_fast after m2";
  }
  EXPECT_EQ(completed, 2) << "m0 and m1 finished before the stall";
  EXPECT_EQ(stalled, 1);
  EXPECT_EQ(by_harness, 17) << "m3..m19 were never sent";

  RunResult val = RunProcess({Exe(), "validate", dir + "/trial"}, dir + "/validate", 60);
  EXPECT_EQ(val.exit_code, 2) << val.out << val.err;
  EXPECT_TRUE(Contains(val.out, "re-derived verdict: correctness_fail")) << val.out;
  EXPECT_TRUE(Contains(val.out, "  - " + first)) << val.out;
}

TEST(ServerFaults, ConnectionRefusedIsASetupErrorWithinTheDeadline) {
  const std::string dir = Scratch("refused");
  const std::string url = "http://127.0.0.1:" + std::to_string(FreePort());
  RunResult r =
      RunProcess(TrialArgv("rel_fast.yaml", url, dir + "/trial", {"--setup-timeout", "3"}),
                 dir + "/trial", 60);
  ASSERT_FALSE(r.timed_out);
  EXPECT_LT(r.wall_s, 3.0 + 10.0) << "the setup deadline was 3 s";
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "server unreachable")) << r.out;
  EXPECT_TRUE(Contains(r.out, "127.0.0.1")) << "the error names the server it tried: " << r.out;
  nlohmann::json v = ReadJson(dir + "/trial/verdict.json");
  EXPECT_EQ(v.value("outcome", ""), "could_not_run");
  ExpectValidateNeverPasses(dir + "/trial", dir + "/validate");
}

TEST(ServerFaults, HealthNeverReadyIsASetupErrorWithinTheDeadline) {
  const std::string dir = Scratch("never-ready");
  SimProcess sim = StartSim(dir, 100, DataPath("faults/health_never_ready.yaml"));
  ASSERT_FALSE(sim.url.empty());
  RunResult r =
      RunProcess(TrialArgv("rel_fast.yaml", sim.url, dir + "/trial", {"--setup-timeout", "3"}),
                 dir + "/trial", 60);
  ASSERT_FALSE(r.timed_out);
  EXPECT_LT(r.wall_s, 3.0 + 10.0) << "the setup deadline was 3 s";
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "not ready")) << r.out;
  EXPECT_TRUE(Contains(r.out, "503")) << r.out;
  EXPECT_EQ(SimGeneratedTokens(sim.port), 0) << "no load may reach a server that is not ready";
  ExpectValidateNeverPasses(dir + "/trial", dir + "/validate");
}

}  // namespace
}  // namespace capq::reliability
