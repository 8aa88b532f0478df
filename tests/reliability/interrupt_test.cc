// SIGINT and SIGTERM while `capq trial` or `capq qualify` is measuring: in-flight requests are
// cancelled, what was measured is on disk and marked incomplete, the exit code is 130, and
// `capq validate` calls the partial directory incomplete, never a pass.
#include <gtest/gtest.h>

#include "process_util.h"

namespace capq::reliability {
namespace {

struct SignalCase {
  int sig;
  const char* name;
};

void PrintTo(const SignalCase& c, std::ostream* os) { *os << c.name; }

class Interrupt : public ::testing::TestWithParam<SignalCase> {};

void ExpectPartialTrialDir(const std::string& trial_dir, const std::string& log_prefix) {
  nlohmann::json v = ReadJson(trial_dir + "/verdict.json");
  EXPECT_EQ(v.value("outcome", ""), "interrupted") << v.dump(1);
  EXPECT_EQ(v.value("exit_code", -1), 130);
  EXPECT_EQ(v.value("complete", true), false);
  EXPECT_EQ(v.value("latency_pass", true), false) << "a partial trial passes no SLO";
  EXPECT_TRUE(fs::exists(trial_dir + "/SHA256SUMS")) << "a partial directory is still sealed";
  RunResult val = RunProcess({Exe(), "validate", trial_dir}, log_prefix, 60);
  EXPECT_NE(val.exit_code, 0) << val.out << val.err;
  EXPECT_TRUE(Contains(val.out, "checksums: ok")) << val.out;
  EXPECT_TRUE(Contains(val.out, "incomplete")) << val.out;
  EXPECT_TRUE(Contains(val.out, "re-derived verdict: interrupted")) << val.out;
  EXPECT_FALSE(Contains(val.out, "re-derived verdict: pass")) << val.out;
}

// `capq trial` on the slow reliability row against `sim`, writing DIR/trial.
std::unique_ptr<Child> StartSlowTrial(const std::string& dir, const SimProcess& sim) {
  return Child::Start({Exe(), "trial", "--row", DataPath("rows/rel_slow.yaml"), "--concurrency",
                       "1", "--trial", "1", "--url", sim.url, "--out", dir + "/trial",
                       "--skip-quiet-period", "--no-progress", "--setup-timeout", "20"},
                      dir + "/trial.out", dir + "/trial.err");
}

TEST_P(Interrupt, TrialWritesWhatItMeasuredMarksItIncompleteAndExits130) {
  const std::string dir = Scratch(std::string("trial-") + GetParam().name);
  SimProcess sim = StartSim(dir, 1);
  ASSERT_FALSE(sim.url.empty());
  auto trial = StartSlowTrial(dir, sim);
  ASSERT_TRUE(trial);
  // 2 warm-up + at least 4 measured requests generated.
  ASSERT_TRUE(WaitForGeneratedTokens(sim.port, 16 * 6, 60)) << trial->Out() << trial->Err();
  ASSERT_FALSE(trial->WaitFor(0)) << "the trial ended before the signal: " << trial->Out();
  trial->Signal(GetParam().sig);
  const double signalled_at = WallS();
  auto code = trial->WaitFor(60);
  ASSERT_TRUE(code) << "capq trial ignores " << GetParam().name;
  // The in-flight request is cancelled, not awaited: well below the 5 s request timeout.
  EXPECT_LT(trial->EndedAtS() - signalled_at, 4.0);
  EXPECT_EQ(*code, 130) << trial->Out() << trial->Err();
  EXPECT_TRUE(Contains(trial->Out(), "verdict: interrupted")) << trial->Out();

  const int kept = CompletedMeasuredRecords(dir + "/trial/raw.jsonl");
  EXPECT_GE(kept, 3) << "requests measured before the signal must be on disk";
  EXPECT_LT(kept, 40) << "nothing new may start after the signal";
  ExpectPartialTrialDir(dir + "/trial", dir + "/validate");
}

INSTANTIATE_TEST_SUITE_P(Signals, Interrupt,
                         ::testing::Values(SignalCase{SIGINT, "SIGINT"},
                                           SignalCase{SIGTERM, "SIGTERM"}),
                         [](const auto& info) { return std::string(info.param.name); });

// SIGKILL: nothing of capq runs after it. The staging folder it leaves holds the raw evidence
// written as each request ended, which `capq validate` reads, calls incomplete and never passes.
TEST(Kill, TrialKilledMidLoadLeavesEvidenceThatValidateCallsIncomplete) {
  const std::string dir = Scratch("trial-sigkill");
  SimProcess sim = StartSim(dir, 1);
  ASSERT_FALSE(sim.url.empty());
  auto trial = StartSlowTrial(dir, sim);
  ASSERT_TRUE(trial);
  // 2 warm-up + at least 4 measured requests generated, so at least 3 measured ones ended.
  ASSERT_TRUE(WaitForGeneratedTokens(sim.port, 16 * 6, 60)) << trial->Out() << trial->Err();
  ASSERT_FALSE(trial->WaitFor(0)) << "the trial ended before the kill: " << trial->Out();
  trial->Signal(SIGKILL);
  ASSERT_TRUE(trial->WaitFor(10));
  EXPECT_FALSE(fs::exists(dir + "/trial/verdict.json")) << "a killed trial seals nothing";
  std::string partial;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("trial.partial-", 0) == 0) partial = e.path().string();
  }
  ASSERT_FALSE(partial.empty()) << "no staging folder left behind";
  const int kept = CompletedMeasuredRecords(partial + "/raw.jsonl");
  EXPECT_GE(kept, 3) << "requests that ended before the kill must be on disk";
  RunResult val = RunProcess({Exe(), "validate", partial}, dir + "/validate", 60);
  EXPECT_NE(val.exit_code, 0) << val.out << val.err;
  EXPECT_TRUE(Contains(val.out, "incomplete")) << val.out;
  EXPECT_TRUE(Contains(val.out, "ended requests whole")) << val.out;
  EXPECT_FALSE(Contains(val.out, "re-derived verdict: pass")) << val.out;
}

class InterruptQualify : public ::testing::TestWithParam<SignalCase> {};

TEST_P(InterruptQualify, KeepsFinishedTrialsMarksTheRunIncompleteAndExits130) {
  const std::string dir = Scratch(std::string("qualify-") + GetParam().name);
  SimProcess sim = StartSim(dir, 1);
  ASSERT_FALSE(sim.url.empty());
  const std::string out = dir + "/q";
  auto q = Child::Start({Exe(), "qualify", DataPath("rows/rel_slow.yaml"), "--url", sim.url,
                         "--out", out, "--max-concurrency", "4", "--trials", "1"},
                        dir + "/qualify.out", dir + "/qualify.err");
  ASSERT_TRUE(q);
  // Wait for the baseline trial to finish, then for the next trial's warm-up and a few measured
  // requests.
  const std::string baseline = out + "/rel_slow/baseline/c1-t1";
  const double end = WallS() + 90;
  while (WallS() < end && !fs::exists(baseline + "/verdict.json") && !q->WaitFor(0)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(fs::exists(baseline + "/verdict.json")) << q->Out() << q->Err();
  const double tokens_at_baseline = SimGeneratedTokens(sim.port);
  ASSERT_TRUE(WaitForGeneratedTokens(sim.port, tokens_at_baseline + 16 * 6, 60))
      << q->Out() << q->Err();
  ASSERT_FALSE(q->WaitFor(0)) << "qualify ended before the signal: " << q->Out() << q->Err();
  q->Signal(GetParam().sig);
  const double signalled_at = WallS();
  auto code = q->WaitFor(60);
  ASSERT_TRUE(code) << "capq qualify ignores " << GetParam().name;
  EXPECT_LT(q->EndedAtS() - signalled_at, 8.0);
  EXPECT_EQ(*code, 130) << q->Out() << q->Err();

  // The run is on disk and says it is incomplete.
  nlohmann::json data = ReadJson(out + "/capacity-data.json");
  ASSERT_TRUE(data.contains("rows") && data["rows"].size() == 1) << data.dump(1);
  const nlohmann::json& row = data["rows"][0];
  EXPECT_EQ(row.value("complete", true), false) << row.dump(1);
  EXPECT_EQ(row["result"].value("status", ""), "interrupted") << row["result"].dump(1);
  EXPECT_TRUE(row["result"]["cmax"].is_null()) << "an interrupted run proves no Cmax";

  // The finished baseline kept its evidence: complete, sealed, and it validates.
  RunResult base = RunProcess({Exe(), "validate", baseline}, dir + "/validate-baseline", 60);
  EXPECT_TRUE(Contains(base.out, "checksums: ok")) << base.out;
  EXPECT_TRUE(Contains(base.out, "complete: yes")) << base.out;
  EXPECT_EQ(base.exit_code, 0) << base.out << base.err;
  EXPECT_EQ(CompletedMeasuredRecords(baseline + "/raw.jsonl"),
            ReadJson(baseline + "/plan.json").value("expected_measured", -1));

  // The trial that was running when the signal came is partial and never passes.
  std::vector<std::string> partial;
  for (const auto& f : FilesUnder(out + "/rel_slow")) {
    if (f.filename() != "verdict.json") continue;
    nlohmann::json v = ReadJson(f.string());
    if (!v.value("complete", true)) partial.push_back(f.parent_path().string());
  }
  ASSERT_EQ(partial.size(), 1u) << "exactly one trial was in flight";
  EXPECT_GE(CompletedMeasuredRecords(partial[0] + "/raw.jsonl"), 2);
  ExpectPartialTrialDir(partial[0], dir + "/validate-partial");
}

INSTANTIATE_TEST_SUITE_P(Signals, InterruptQualify,
                         ::testing::Values(SignalCase{SIGINT, "SIGINT"},
                                           SignalCase{SIGTERM, "SIGTERM"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace capq::reliability
