// capq doctor as a user runs it, against the embedded simulator started here: a server capq can
// qualify passes in each dialect; one launched without a cache counter, without slot actions or
// unlike the row fails the check that decides it and names the fix; nothing is generated.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "capq/model/row_loader.h"
#include "capq/sim/server.h"
#include "cli_test_util.h"

namespace {

namespace fs = std::filesystem;
using capq::sim::Dialect;
using capq::sim::SimServer;
using capq::testing::Capq;
using capq::testing::Read;
using capq::testing::StartSim;

fs::path FreshDir(const std::string& name) { return capq::testing::FreshDir("capq_doctor_", name); }

const std::string kSource = CAPQ_SOURCE_DIR;

// A copy of a shipped profile in `dir`, with `from` replaced by `to` (or `to` appended when
// `from` is empty): the simulator launched with other settings.
std::string EditedProfile(const fs::path& dir, const std::string& name, const std::string& from,
                          const std::string& to) {
  std::string text = Read(kSource + "/rows/sim/profiles/" + name);
  if (from.empty()) {
    text += "\n" + to;
  } else {
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
  }
  const fs::path out = dir / name;
  std::ofstream(out) << text;
  return out.string();
}

// The line of check `name` ("FAIL  cache counter   ..."), or "" when none was printed.
std::string CheckLine(const std::string& out, const std::string& name) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.size() > 6 && line.compare(6, name.size() + 1, name + " ") == 0) return line;
  }
  return "";
}

std::string LevelOf(const std::string& out, const std::string& name) {
  const std::string line = CheckLine(out, name);
  return line.substr(0, line.find(' '));
}

// Runs doctor against `sim`; asserts that no chat completion reached it.
int Doctor(SimServer& sim, const std::vector<std::string>& extra, std::string* out) {
  std::vector<std::string> args = {"doctor", "--url", sim.url()};
  args.insert(args.end(), extra.begin(), extra.end());
  const int rc = Capq(args, out);
  EXPECT_EQ(sim.requests_received(), 0) << "doctor sent a chat completion\n" << *out;
  return rc;
}

TEST(DoctorCommand, ServerCapqCanQualifyPasses) {
  auto sim = StartSim(kSource + "/rows/sim/profiles/small.yaml", Dialect::kSglang);
  ASSERT_TRUE(sim);
  std::string out;
  EXPECT_EQ(Doctor(*sim, {"--engine", "sim"}, &out), 0) << out;
  for (const char* check : {"ready", "info", "model", "metrics", "cache counter", "cache settings",
                            "flush", "tokenizer", "template"}) {
    EXPECT_EQ(LevelOf(out, check), "ok") << check << "\n" << out;
  }
  EXPECT_NE(out.find("a qualification could pass"), std::string::npos) << out;
}

// SGLang launched with neither --enable-cache-report nor --enable-metrics: no stream and no
// /metrics will ever count cached tokens, so verify_cold would fail closed.
TEST(DoctorCommand, ServerWithoutCacheCounterFailsAndNamesTheFlag) {
  const fs::path dir = FreshDir("silent");
  auto sim = StartSim(EditedProfile(dir, "small.yaml", "", "metrics: false\ncache_report: false\n"),
                      Dialect::kSglang);
  ASSERT_TRUE(sim);
  std::string out;
  EXPECT_EQ(Doctor(*sim, {"--engine", "sim"}, &out), 1) << out;
  EXPECT_EQ(LevelOf(out, "cache counter"), "FAIL") << out;
  const size_t fix = out.find("fix: start SGLang with --enable-cache-report");
  EXPECT_NE(fix, std::string::npos) << out;
  EXPECT_GT(fix, out.find(CheckLine(out, "cache counter"))) << "the fix follows its check\n" << out;
  EXPECT_NE(out.find("decided by: cache counter\n"), std::string::npos) << out;
}

// Launched without /metrics but with a per-request cache counter: a qualification can still pass
// (the load before a flush goes unread), and the metrics line names the flag in each engine's
// words.
TEST(DoctorCommand, ServerWithoutMetricsWarnsAndNamesTheFlag) {
  const fs::path dir = FreshDir("nometrics");
  const struct {
    const char* engine;
    const char* profile;
    Dialect dialect;
    const char* hint;
  } cases[] = {{"sim", "small.yaml", Dialect::kSglang, "start SGLang with --enable-metrics"},
               {"sim:llamacpp", "llamacpp_tiny.yaml", Dialect::kLlamacpp,
                "start llama-server with --metrics"}};
  for (const auto& c : cases) {
    auto sim = StartSim(EditedProfile(dir, c.profile, "", "metrics: false\n"), c.dialect);
    ASSERT_TRUE(sim);
    std::string out;
    EXPECT_EQ(Doctor(*sim, {"--engine", c.engine}, &out), 0) << c.engine << "\n" << out;
    EXPECT_EQ(LevelOf(out, "metrics"), "warn") << c.engine << "\n" << out;
    const size_t hint = out.find(std::string("hint: ") + c.hint);
    EXPECT_NE(hint, std::string::npos) << c.engine << "\n" << out;
    EXPECT_GT(hint, out.find(CheckLine(out, "metrics"))) << c.engine << "\n" << out;
  }
}

TEST(DoctorCommand, VllmAndLlamacppDialectsPass) {
  const struct {
    const char* engine;
    const char* profile;
    Dialect dialect;
  } cases[] = {{"vllm", "small.yaml", Dialect::kVllm},
               {"sim:vllm", "small.yaml", Dialect::kVllm},
               {"llamacpp", "llamacpp_tiny.yaml", Dialect::kLlamacpp},
               {"sim:llamacpp", "llamacpp_tiny.yaml", Dialect::kLlamacpp}};
  for (const auto& c : cases) {
    auto sim = StartSim(kSource + "/rows/sim/profiles/" + c.profile, c.dialect);
    ASSERT_TRUE(sim);
    std::string out;
    EXPECT_EQ(Doctor(*sim, {"--engine", c.engine}, &out), 0) << c.engine << "\n" << out;
    EXPECT_EQ(out.find("FAIL"), std::string::npos) << c.engine << "\n" << out;
    EXPECT_EQ(LevelOf(out, "tokenizer"), "ok") << c.engine << "\n" << out;
    // Neither engine's flush answer proves the cache empty; the adapter says what to change.
    EXPECT_EQ(LevelOf(out, "flush"), "warn") << c.engine << "\n" << out;
  }
}

// llama.cpp without --slot-save-path refuses every slot action, so its flush cannot run.
TEST(DoctorCommand, LlamacppWithoutSlotActionsFailsTheFlush) {
  const fs::path dir = FreshDir("noslots");
  auto sim = StartSim(
      EditedProfile(dir, "llamacpp_tiny.yaml", "slot_actions: true", "slot_actions: false"),
      Dialect::kLlamacpp);
  ASSERT_TRUE(sim);
  std::string out;
  EXPECT_EQ(Doctor(*sim, {"--engine", "llamacpp"}, &out), 1) << out;
  const std::string flush = CheckLine(out, "flush");
  EXPECT_EQ(LevelOf(out, "flush"), "FAIL") << out;
  EXPECT_NE(flush.find("--slot-save-path"), std::string::npos) << out;
  EXPECT_NE(out.find("decided by: flush\n"), std::string::npos) << out;
}

// A sim row on the small profile (max_running_requests 6) pinning `running` requests.
std::string WriteRow(const fs::path& dir, int running) {
  const std::string yaml =
      "schema: capq/row/v1\nid: doctor_row\nidentity:\n  engine: sim\n"
      "  sim_profile: " +
      kSource + "/rows/sim/profiles/small.yaml\n  time_scale: 10\n" +
      "  server_expect:\n    max_running_requests: " + std::to_string(running) + R"(
workload:
  input_tokens: 64
  output_tokens: 16
  sampling: {temperature: 0, ignore_eos: true}
  arrival: {kind: closed_loop}
cache: {prefix_cache: enabled, flush_before_trial: true, verify_cold: true}
warmup: {requests: 2, concurrency: 1}
measured: {min_requests: 20, per_concurrency: 1}
slo:
  - {metric: ttft, percentile: 95, below_ms: 100000}
trials: {count: 3, quiet_period_s: 0, seeds: [11, 22, 33]}
request_timeout_s: 600
)";
  const fs::path path = dir / ("row_" + std::to_string(running) + ".yaml");
  std::ofstream(path) << yaml;
  EXPECT_TRUE(capq::LoadRow(path.string()).ok()) << yaml;
  return path.string();
}

TEST(DoctorCommand, RowPinningAnotherLimitFailsTheIdentityNamingTheField) {
  const fs::path dir = FreshDir("identity");
  auto sim = StartSim(kSource + "/rows/sim/profiles/small.yaml", Dialect::kSglang);
  ASSERT_TRUE(sim);
  std::string out;
  EXPECT_EQ(Doctor(*sim, {"--row", WriteRow(dir, 9)}, &out), 1) << out;
  EXPECT_EQ(LevelOf(out, "identity"), "FAIL") << out;
  EXPECT_NE(
      CheckLine(out, "identity").find("server_expect.max_running_requests pinned 9, running 6"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("decided by: identity\n"), std::string::npos) << out;
  // The same row pinning what the server runs passes: the field alone decided.
  EXPECT_EQ(Doctor(*sim, {"--row", WriteRow(dir, 6)}, &out), 0) << out;
  EXPECT_EQ(LevelOf(out, "identity"), "ok") << out;
}

TEST(DoctorCommand, UnreachableServerExitsThree) {
  auto sim = StartSim(kSource + "/rows/sim/profiles/small.yaml", Dialect::kSglang);
  ASSERT_TRUE(sim);
  const std::string url = sim->url();
  sim->Stop();
  sim.reset();  // nothing listens on its port now
  std::string out;
  EXPECT_EQ(Capq({"doctor", "--url", url, "--timeout", "0.5"}, &out), 3) << out;
  EXPECT_EQ(LevelOf(out, "ready"), "FAIL") << out;
  EXPECT_EQ(CheckLine(out, "flush"), "") << "nothing is checked past readiness\n" << out;
}

TEST(DoctorCommand, BadArgumentsExitTwo) {
  const fs::path dir = FreshDir("args");
  std::string out;
  EXPECT_EQ(Capq({"doctor", "--url", "http://127.0.0.1:1", "--engine", "tgi"}, &out), 2) << out;
  EXPECT_NE(out.find("unknown engine 'tgi'"), std::string::npos) << out;
  EXPECT_EQ(
      Capq({"doctor", "--url", "http://127.0.0.1:1", "--row", WriteRow(dir, 6), "--engine", "vllm"},
           &out),
      2)
      << out;
  EXPECT_NE(out.find("--engine vllm but row doctor_row"), std::string::npos) << out;
  EXPECT_EQ(Capq({"doctor", "--url", "ftp://127.0.0.1:1"}, &out), 2) << out;
}

}  // namespace
