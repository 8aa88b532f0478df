// Healthy servers frame their answers in many ways (sim/variations.h); each must pass, and a server
// that lies must still fail, whatever its framing.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "trial_test_util.h"

namespace capq::testing {
namespace {

// The small profile with `extra` profile keys appended, in `dir`; the row's sim_profile points at
// it, so the simulator's digest is that file's.
Row RowWithProfile(const std::string& dir, const std::string& extra,
                   const std::string& identity_lines = "") {
  std::ifstream in(std::string(CAPQ_SOURCE_DIR) + "/rows/sim/profiles/small.yaml");
  std::stringstream text;
  text << in.rdbuf() << "\n" << extra;
  const std::string path = WriteText(dir + "/profile.yaml", text.str());
  SimRowSpec spec;
  spec.server_expect = identity_lines;
  Row row = MakeSimRow(spec);
  row.identity.sim_profile = path;
  return row;
}

TrialReport RunOn(const Row& row, const std::string& dir, const std::string& faults = "",
                  int concurrency = 2) {
  auto sim = StartSim(row, faults);
  EXPECT_TRUE(sim);
  if (!sim) return {};
  TrialReport rep = RunTrial(row, Options(sim->url(), dir + "/trial", concurrency));
  sim->Stop();
  return rep;
}

// The measured streams of a trial directory, as results.jsonl decoded them.
std::vector<nlohmann::json> Measured(const std::string& trial_dir) {
  std::ifstream in(trial_dir + "/results.jsonl");
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json r = nlohmann::json::parse(line);
    if (r.value("phase", "") == "measured") out.push_back(r);
  }
  return out;
}

// The gate `name` of a trial's verdict passed (or not) and its evidence says `words`.
void ExpectGate(const TrialReport& rep, const std::string& name, bool passed,
                const std::string& words) {
  const GateResult* g = Gate(rep.verdict, name);
  ASSERT_NE(g, nullptr) << name;
  EXPECT_EQ(g->passed, passed) << g->evidence;
  EXPECT_NE(g->evidence.find(words), std::string::npos) << g->evidence;
}

// --stream-interval 3 and no speculative settings: 16 tokens in 6 chunks with text (the first
// alone, then three at a time), and every gate passes on the re-count.
TEST(TrialVariations, ThreeTokensPerChunkPass) {
  const std::string dir = ScratchDir("var-interval");
  Row row = RowWithProfile(dir, "stream_interval: 3\n");
  TrialReport rep = RunOn(row, dir);
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kPass)
      << (rep.verdict.reasons.empty() ? "" : rep.verdict.reasons[0]);
  const std::vector<nlohmann::json> meas = Measured(dir + "/trial");
  ASSERT_FALSE(meas.empty());
  for (const nlohmann::json& r : meas) {
    EXPECT_EQ(r["completion_tokens"], 16);
    EXPECT_LE(r["nonempty_chunks"], 6) << r["id"];  // fewer when a slow read merged more
  }
}

// The same server whose usage claims twice the text it streams fails the re-count.
TEST(TrialVariations, HalfTheClaimedTextFailsTheRecount) {
  const std::string dir = ScratchDir("var-half");
  Row row = RowWithProfile(dir, "stream_interval: 3\n");
  const std::string faults =
      WriteText(dir + "/faults.yaml", "faults:\n  - {kind: hollow_usage, requests: [4]}\n");
  // One stream at a time, so the server's fifth request is always m2: at C=2, m0 and m1 end in
  // the same decode step and m2 and m3 race to the server.
  TrialReport rep = RunOn(row, dir, faults, 1);
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kCorrectnessFail);
  ExpectGate(rep, "text_recount", false, "m2 (usage says 16, the text re-counts to 8)");
}

// SGLang as the seed launches it: --enable-cache-report, no --enable-metrics. A cold request's
// details are null and there is no /metrics; verify_cold reads null as nothing cached, as
// SGLang's source says, and says so.
TEST(TrialVariations, SeedLikeSglangLaunchQualifiesCold) {
  const std::string dir = ScratchDir("var-seed-sglang");
  Row row = RowWithProfile(dir, "metrics: false\n");
  TrialReport rep = RunOn(row, dir);
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kPass)
      << (rep.verdict.reasons.empty() ? "" : rep.verdict.reasons[0]);
  ExpectGate(rep, "verify_cold", true, "read as 0: SGLang with --enable-cache-report");
}

// Without the cache report and without metrics nothing proves the cache cold: verify_cold fails
// closed and names the flags that would make the server report.
TEST(TrialVariations, SilentServerFailsClosedNamingTheFlag) {
  const std::string dir = ScratchDir("var-silent");
  Row row = RowWithProfile(dir, "metrics: false\ncache_report: false\n");
  TrialReport rep = RunOn(row, dir);
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kCorrectnessFail);
  ExpectGate(rep, "verify_cold", false, "start SGLang with --enable-cache-report");
}

// Without the cache report but with --enable-metrics the server's own counter
// (sglang:cached_tokens_total) proves the cache cold, as the launch hint says it would.
TEST(TrialVariations, MetricsAloneProveTheCacheColdWithoutTheCacheReport) {
  const std::string dir = ScratchDir("var-metrics-only");
  Row row = RowWithProfile(dir, "cache_report: false\n");
  TrialReport rep = RunOn(row, dir);
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kPass)
      << (rep.verdict.reasons.empty() ? "" : rep.verdict.reasons[0]);
  ExpectGate(rep, "verify_cold", true, "server cache-hit counter");
}

// Varied mode on each OpenAI-style dialect: every request draws its own framing, and the trial
// passes; `capq validate` re-derives the same verdict from the evidence.
TEST(TrialVariations, VariedFramingPassesInEveryDialect) {
  for (const char* dialect : {"sglang", "vllm"}) {
    SCOPED_TRACE(dialect);
    const std::string dir = ScratchDir(std::string("var-varied-") + dialect);
    Row row = RowWithProfile(
        dir, "", std::string("  sim_dialect: ") + dialect + "\n  sim_variations: varied\n");
    TrialReport rep = RunOn(row, dir);
    EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kPass)
        << (rep.verdict.reasons.empty() ? "" : rep.verdict.reasons[0]);
    auto v = ValidateTrialDir(dir + "/trial");
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->verdict.outcome, TrialOutcome::kPass);
    int merged = 0;
    for (const nlohmann::json& r : Measured(dir + "/trial")) merged += r["nonempty_chunks"] < 16;
    EXPECT_GT(merged, 0) << "no stream carried several tokens in a chunk";
  }
}

}  // namespace
}  // namespace capq::testing
