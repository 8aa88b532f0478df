// Each simulator fault must trip the correctness gate made for it, with a reason in words; a
// broken server never yields a pass.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "trial_test_util.h"

namespace capq::testing {
namespace {

struct FaultCase {
  std::string name;
  std::string rule;   // one YAML list item under `faults:`
  std::string gate;   // the gate that must fail
  std::string words;  // must appear in that gate's evidence
  // Gates that may fail as well because the fault really breaks them too (a cut stream also has
  // no usage and no finish reason); any other failing gate is a defect.
  std::set<std::string> also;
};

void PrintTo(const FaultCase& c, std::ostream* os) { *os << c.name; }

// Requests are numbered by arrival; with 2 warm-ups, 2..21 are the measured ones.
std::vector<FaultCase> Cases() {
  return {
      {"http_500",
       "{kind: http_status, status: 500, requests: [5]}",
       "status_200",
       "HTTP",
       {"no_cancellations", "zero_errors", "exact_completion_tokens", "finish_reason",
        "nonempty_deltas", "verify_cold"}},
      {"cut",
       "{kind: cut_connection, after_tokens: 3, requests: [6]}",
       "no_cancellations",
       "m",
       {"zero_errors", "exact_completion_tokens", "finish_reason", "status_200", "verify_cold"}},
      // A usage that claims a token the stream never carried: the re-count sees it too.
      {"usage_off",
       "{kind: usage_off_by, n: 1, requests: [7]}",
       "exact_completion_tokens",
       "m5",
       {"text_recount"}},
      {"early_stop",
       "{kind: early_stop, after_tokens: 4, requests: [8]}",
       "finish_reason",
       "m6",
       {"exact_completion_tokens"}},
      {"empty_deltas",
       "{kind: empty_deltas, requests: [9]}",
       "nonempty_deltas",
       "m7",
       {"unique_outputs", "text_recount"}},
      {"duplicate", "{kind: duplicate_output, requests: [10, 11]}", "unique_outputs", "m", {}},
      {"malformed",
       "{kind: malformed_json, after_tokens: 2, requests: [12]}",
       "zero_errors",
       "m10",
       {"exact_completion_tokens", "nonempty_deltas", "unique_outputs"}},
      {"missing_done", "{kind: missing_done, requests: [13]}", "zero_errors", "m11", {}},
      {"error_frame",
       "{kind: error_frame, after_tokens: 3, requests: [14]}",
       "zero_errors",
       "m12",
       {"exact_completion_tokens", "finish_reason", "no_cancellations", "verify_cold"}},
      {"stall",
       "{kind: stall, after_tokens: 3, requests: [15]}",
       "no_cancellations",
       "m13",
       {"zero_errors", "exact_completion_tokens", "finish_reason", "status_200", "verify_cold"}},
  };
}

class TrialFault : public ::testing::TestWithParam<FaultCase> {};

void ExpectTripped(const FaultCase& fc, const TrialReport& rep, const std::string& trial_dir) {
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kCorrectnessFail)
      << TrialOutcomeName(rep.verdict.outcome)
      << (rep.verdict.reasons.empty() ? "" : ": " + rep.verdict.reasons[0]);
  EXPECT_EQ(rep.verdict.ExitCode(), 2);
  const GateResult* g = Gate(rep.verdict, fc.gate);
  ASSERT_NE(g, nullptr);
  EXPECT_FALSE(g->passed) << fc.gate << ": " << g->evidence;
  EXPECT_NE(g->evidence.find(fc.words), std::string::npos) << g->evidence;
  bool reason_names_gate = false;
  for (const auto& r : rep.verdict.reasons) reason_names_gate |= r.rfind(fc.gate + ":", 0) == 0;
  EXPECT_TRUE(reason_names_gate) << "no reason starts with '" << fc.gate << ":'";
  for (const auto& other : rep.verdict.correctness.gates) {
    if (other.name == fc.gate || !other.enabled || other.passed) continue;
    EXPECT_TRUE(fc.also.count(other.name)) << "fault " << fc.name << " also failed unrelated gate "
                                           << other.name << ": " << other.evidence;
  }
  // The recorded evidence reproduces the same verdict.
  auto v = ValidateTrialDir(trial_dir);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->problems.empty()) << v->problems[0];
  EXPECT_EQ(v->verdict.outcome, TrialOutcome::kCorrectnessFail);
}

// Every fault trips its gate whatever the framing: the dialect's own, and every benign variation
// real servers send (sim/variations.h, varied mode).
TEST_P(TrialFault, TripsItsGate) {
  const FaultCase& fc = GetParam();
  for (const char* mode : {"dialect", "varied"}) {
    SCOPED_TRACE(std::string("variations: ") + mode);
    SimRowSpec spec;
    spec.request_timeout_s = 100;  // 1 wall second at x100: the stall must time out quickly
    spec.server_expect = std::string("  sim_variations: ") + mode + "\n";
    Row row = MakeSimRow(spec);
    std::string dir = ScratchDir("fault-" + fc.name + "-" + mode);
    std::string faults = WriteText(dir + "/faults.yaml", "faults:\n  - " + fc.rule + "\n");
    auto sim = StartSim(row, faults);
    ASSERT_TRUE(sim);
    TrialReport rep = RunTrial(row, Options(sim->url(), dir + "/trial"));
    sim->Stop();
    ExpectTripped(fc, rep, dir + "/trial");
  }
}

INSTANTIATE_TEST_SUITE_P(Faults, TrialFault, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<FaultCase>& i) { return i.param.name; });

// A flush that says yes and keeps the cache: the second trial with the same seed sends the same
// prompts, and only verify-cold can tell.
TEST(TrialFaultLyingFlush, CaughtByVerifyCold) {
  Row row = MakeSimRow({});
  std::string dir = ScratchDir("lying-flush");
  std::string faults = WriteText(dir + "/faults.yaml", "faults:\n  - {kind: lying_flush}\n");
  auto sim = StartSim(row, faults);
  ASSERT_TRUE(sim);
  TrialReport first = RunTrial(row, Options(sim->url(), dir + "/first"));
  EXPECT_EQ(first.verdict.outcome, TrialOutcome::kPass)
      << (first.verdict.reasons.empty() ? "" : first.verdict.reasons[0]);
  TrialReport second = RunTrial(row, Options(sim->url(), dir + "/second"));
  EXPECT_EQ(second.verdict.outcome, TrialOutcome::kCorrectnessFail);
  const GateResult* g = Gate(second.verdict, "verify_cold");
  ASSERT_NE(g, nullptr);
  EXPECT_FALSE(g->passed);
  EXPECT_NE(g->evidence.find("cached prompt tokens"), std::string::npos) << g->evidence;
  // The allowance is the template prefix the server itself renders, and the failure says what
  // to change on this engine.
  EXPECT_NE(g->evidence.find("than the 3 shared template tokens allowed"), std::string::npos)
      << g->evidence;
  EXPECT_NE(g->evidence.find("SGLang's /flush_cache"), std::string::npos) << g->evidence;
  for (const auto& other : second.verdict.correctness.gates) {
    if (other.name == "verify_cold") continue;
    EXPECT_TRUE(!other.enabled || other.passed) << other.name << ": " << other.evidence;
  }
}

}  // namespace
}  // namespace capq::testing

namespace capq::testing {
namespace {

// The recorded llama.cpp server's profile written into `dir`, with the switches a launch line
// flips: `host_cache` false stands for `--cache-ram 0`, `prefix_cache` false for a server that
// reuses no prompt (cache_prompt: false).
void WriteLlamacppProfile(const std::string& dir, bool host_cache, bool prefix_cache = true) {
  std::ifstream in(std::string(CAPQ_SOURCE_DIR) + "/rows/sim/profiles/llamacpp_tiny.yaml");
  std::stringstream profile;
  profile << in.rdbuf();
  std::string text = profile.str();
  auto flip = [&text](const std::string& on, const std::string& off) {
    text.replace(text.find(on), on.size(), off);
  };
  if (!host_cache) flip("host_prompt_cache: true", "host_prompt_cache: false");
  if (!prefix_cache) flip("prefix_cache: true", "prefix_cache: false");
  std::filesystem::create_directories(dir + "/profiles");
  WriteText(dir + "/profiles/llamacpp_tiny.yaml", text);
}

Row LoadTestRow(const std::string& yaml, const std::string& path) {
  Result<Row> row = LoadRowFromString(yaml, path);
  EXPECT_TRUE(row.ok()) << row.status().ToString();
  return row.ok() ? *row : Row{};
}

// The llama.cpp row shape against the simulator speaking llama.cpp's dialect.
Row LlamacppRow(const std::string& dir, bool host_cache) {
  WriteLlamacppProfile(dir, host_cache);
  const std::string yaml =
      "schema: capq/row/v1\nid: llamacpp_leak\nidentity:\n  engine: sim\n"
      "  sim_profile: profiles/llamacpp_tiny.yaml\n  time_scale: 20\n  sim_dialect: llamacpp\n"
      "  server_expect: {total_slots: 8, n_ctx: 2048}\n"
      "workload: {input_tokens: 64, output_tokens: 8, sampling: {temperature: 0, ignore_eos: "
      "true}, arrival: {kind: closed_loop}}\n"
      "cache: {prefix_cache: enabled, flush_before_trial: true, verify_cold: true}\n"
      "warmup: {requests: 2}\nmeasured: {min_requests: 20, per_concurrency: 1}\n"
      "slo:\n  - {metric: ttft, percentile: 95, below_ms: 100000}\n"
      "trials: {count: 1, quiet_period_s: 0, seeds: [5]}\n";
  return LoadTestRow(yaml, dir + "/llamacpp_leak.yaml");
}

// The same trial twice, each after erasing every slot: llama.cpp's host-memory prompt cache
// survives the erase and restores the first trial's prompts, so only verify_cold can tell, and
// it names the flag that fixes it. With the host cache off (--cache-ram 0) the erase is complete.
TEST(TrialLlamacppDialect, EraseLeavesTheHostCacheAndVerifyColdNamesTheFlag) {
  for (bool host_cache : {true, false}) {
    SCOPED_TRACE(host_cache ? "default --cache-ram" : "--cache-ram 0");
    std::string dir = ScratchDir(host_cache ? "llama-leak" : "llama-cr0");
    Row row = LlamacppRow(dir, host_cache);
    auto sim = StartSim(row);
    ASSERT_TRUE(sim);
    TrialReport first = RunTrial(row, Options(sim->url(), dir + "/first", 2));
    ASSERT_EQ(first.verdict.outcome, TrialOutcome::kPass)
        << (first.verdict.reasons.empty() ? "" : first.verdict.reasons[0]);
    std::ifstream id_in(dir + "/first/identity.json");
    nlohmann::json id = nlohmann::json::parse(id_in);
    EXPECT_EQ(id["template_prefix"]["tokens"], 4) << "<s> <|user|> ▁ \\n, measured on the server";
    EXPECT_EQ(id["cold_prefix"]["allowed_tokens"], 4);
    TrialReport again = RunTrial(row, Options(sim->url(), dir + "/again", 2));
    const GateResult* g = Gate(again.verdict, "verify_cold");
    ASSERT_NE(g, nullptr);
    if (host_cache) {
      EXPECT_EQ(again.verdict.outcome, TrialOutcome::kCorrectnessFail);
      EXPECT_FALSE(g->passed);
      EXPECT_NE(g->evidence.find("--cache-ram 0"), std::string::npos) << g->evidence;
    } else {
      EXPECT_TRUE(g->passed) << g->evidence;
      EXPECT_EQ(again.verdict.outcome, TrialOutcome::kPass);
    }
  }
}

}  // namespace
}  // namespace capq::testing

namespace capq::testing {
namespace {

// Issue 29's prefix row: 512-token prompts, three quarters of them opening with one of two
// 384-token prefixes, at C=4 on the llama.cpp dialect launched with --cache-ram 0 unless
// `host_cache`.
Row LlamacppPrefixRow(const std::string& dir, bool prefix_cache, bool host_cache = false) {
  WriteLlamacppProfile(dir, host_cache, prefix_cache);
  const std::string yaml =
      "schema: capq/row/v1\nid: llamacpp_prefix\nidentity:\n  engine: sim\n"
      "  sim_profile: profiles/llamacpp_tiny.yaml\n  time_scale: 10\n  sim_dialect: llamacpp\n"
      "  server_expect: {total_slots: 8, n_ctx: 2048}\n"
      "workload: {input_tokens: 512, output_tokens: 16, sampling: {temperature: 0, ignore_eos: "
      "true}, arrival: {kind: closed_loop}}\n"
      "prefix:\n  groups:\n    - {prefixes: 2, tokens: 384, share: 0.75}\n"
      "  reuse_tolerance: {tokens: 16, ratio_pct: 2}\n"
      "cache: {prefix_cache: enabled, flush_before_trial: true, verify_cold: true}\n"
      "warmup: {requests: 2}\nmeasured: {min_requests: 64, per_concurrency: 4}\n"
      "slo:\n  - {metric: ttft, percentile: 95, below_ms: 100000}\n"
      "trials: {count: 1, quiet_period_s: 0, seeds: [5]}\n";
  return LoadTestRow(yaml, dir + "/llamacpp_prefix.yaml");
}

// Issue 29's row once at C=4 against its own simulator; the trial's cache_reuse gate, its verdict
// and its identity.json.
struct PrefixTrial {
  GateResult reuse;
  TrialOutcome outcome = TrialOutcome::kCouldNotRun;
  nlohmann::json identity;
};

PrefixTrial RunPrefixTrial(const std::string& name, bool prefix_cache, bool host_cache = false) {
  const std::string dir = ScratchDir(name);
  const Row row = LlamacppPrefixRow(dir, prefix_cache, host_cache);
  auto sim = StartSim(row);
  EXPECT_TRUE(sim);
  if (!sim) return {};
  const TrialReport report = RunTrial(row, Options(sim->url(), dir + "/trial", 4));
  PrefixTrial t;
  t.outcome = report.verdict.outcome;
  if (const GateResult* g = Gate(report.verdict, "cache_reuse")) t.reuse = *g;
  std::ifstream id_in(dir + "/trial/identity.json");
  t.identity = nlohmann::json::parse(id_in, nullptr, false);
  return t;
}

// Prompts that share a prefix arrive together and take different slots, so some of the opening
// burst miss it, as on the real server: the misses are named and explained by the engine's cache
// model, and the trial passes on the served ratio. A server that reuses nothing still fails.
TEST(TrialLlamacppDialect, PrefixCollisionsAreReportedAndTheServedRatioDecides) {
  const PrefixTrial t = RunPrefixTrial("llama-prefix", /*prefix_cache=*/true);
  const std::string& ev = t.reuse.evidence;
  EXPECT_TRUE(t.reuse.passed) << ev;
  EXPECT_EQ(t.outcome, TrialOutcome::kPass) << ev;
  EXPECT_NE(ev.find("missed their declared reuse"), std::string::npos) << ev;
  EXPECT_NE(ev.find("reported, not failed"), std::string::npos) << ev;
  EXPECT_NE(t.identity["cache_misses"].value("explained_by", "").find("per slot"),
            std::string::npos)
      << t.identity.dump();

  // With the default host cache a colliding request may restore its prefix from host memory.
  const PrefixTrial host = RunPrefixTrial("llama-prefix-host", true, /*host_cache=*/true);
  EXPECT_TRUE(host.reuse.passed) << host.reuse.evidence;
  EXPECT_EQ(host.outcome, TrialOutcome::kPass) << host.reuse.evidence;

  const PrefixTrial off = RunPrefixTrial("llama-no-prefix-cache", /*prefix_cache=*/false);
  EXPECT_FALSE(off.reuse.passed) << off.reuse.evidence;
  EXPECT_NE(off.reuse.evidence.find("points: no"), std::string::npos) << off.reuse.evidence;
}

}  // namespace
}  // namespace capq::testing
