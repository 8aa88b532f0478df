// Prefix and session rows on the embedded simulator: the served hit ratio is gated (and fails
// with the prefix cache off), a session's later turn resends exactly the text the server streamed
// (shown from the raw evidence alone), and capq validate re-derives the reuse gates.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../../harness/src/trial/trial_internal.h"
#include "capq/measurement/decode.h"
#include "capq/measurement/raw_evidence.h"
#include "capq/model/plan.h"
#include "capq/model/reuse.h"
#include "capq/model/row_loader.h"
#include "capq/trial/trial.h"
#include "trial_test_util.h"

namespace capq {
namespace {

using testing::Gate;
using testing::Options;
using testing::ScratchDir;
using testing::StartSim;

const std::string kSimRows = std::string(CAPQ_SOURCE_DIR) + "/rows/sim/";

Row LoadFast(const std::string& file, double time_scale) {
  Result<Row> row = LoadRow(kSimRows + file);
  EXPECT_TRUE(row.ok()) << row.status().ToString();
  if (!row.ok()) return Row{};
  row->identity.time_scale = time_scale;
  // These trials show the reuse gates, not the boundary: a loaded or instrumented machine at a
  // large time scale must not turn them into SLO misses.
  for (SloGate& g : row->slo) g.below_ms = 1e7;
  return *row;
}

// The same engine with its prefix cache off (SGLang's --disable-radix-cache): the row's identity
// no longer pins the image, since the profile is not the one it was measured on.
std::unique_ptr<sim::SimServer> StartWithoutPrefixCache(Row* row, const std::string& dir) {
  std::ifstream in(row->identity.sim_profile);
  std::stringstream text;
  text << in.rdbuf();
  std::string profile = text.str();
  const std::string on = "prefix_cache: true";
  const size_t at = profile.find(on);
  EXPECT_NE(at, std::string::npos);
  profile.replace(at, on.size(), "prefix_cache: false");
  row->identity.sim_profile = testing::WriteText(dir + "/no_prefix_cache.yaml", profile);
  row->identity.image.clear();
  return StartSim(*row);
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::string RawPath(const std::string& dir) {
  return std::filesystem::exists(dir + "/raw.jsonl.zst") ? dir + "/raw.jsonl.zst"
                                                         : dir + "/raw.jsonl";
}

TEST(TrialReuse, APrefixRowIsServedItsDeclaredHitsAndValidateAgrees) {
  Row row = LoadFast("sim_small_prefix.yaml", 40);
  const std::string dir = ScratchDir("prefix");
  auto sim = StartSim(row);
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrial(row, Options(sim->url(), dir + "/trial", 2));
  sim->Stop();
  ASSERT_EQ(rep.verdict.outcome, TrialOutcome::kPass) << rep.verdict.reasons.front();
  ASSERT_NE(Gate(rep.verdict, "cache_reuse"), nullptr);
  EXPECT_TRUE(Gate(rep.verdict, "cache_reuse")->passed)
      << Gate(rep.verdict, "cache_reuse")->evidence;
  EXPECT_TRUE(Gate(rep.verdict, "verify_cold")->passed)
      << Gate(rep.verdict, "verify_cold")->evidence;
  const nlohmann::json reuse = ReadJson(dir + "/trial/metrics.json")["reuse"];
  EXPECT_EQ(reuse["requests"], 64);
  // 48 of 64 prompts of 1,024 + 51 template tokens share 768: declared 53.6%.
  EXPECT_NEAR(reuse["declared_ratio"].get<double>(), 48.0 * 768 / (64 * 1075), 1e-9);
  EXPECT_NEAR(reuse["served_ratio"].get<double>(), reuse["declared_ratio"].get<double>(), 0.02);
  const nlohmann::json plan = ReadJson(dir + "/trial/plan.json");
  EXPECT_EQ(plan["warmup"][4]["id"], "p0");
  EXPECT_EQ(plan["warmup"][5]["id"], "p1");
  auto v = ValidateTrialDir(dir + "/trial");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->problems.empty()) << v->problems.front();
  ASSERT_NE(v->verdict.correctness.Find("cache_reuse"), nullptr);
  EXPECT_EQ(v->verdict.correctness.Find("cache_reuse")->evidence,
            Gate(rep.verdict, "cache_reuse")->evidence);
}

TEST(TrialReuse, WithThePrefixCacheOffTheSameTrialFailsCacheReuse) {
  Row row = LoadFast("sim_small_prefix.yaml", 40);
  const std::string dir = ScratchDir("prefix-off");
  auto sim = StartWithoutPrefixCache(&row, dir);
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrial(row, Options(sim->url(), dir + "/trial", 2));
  sim->Stop();
  // Every stream is correct; the server just did not serve the row as declared.
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kSloFail);
  EXPECT_TRUE(rep.verdict.correctness_pass);
  const GateResult* g = Gate(rep.verdict, "cache_reuse");
  ASSERT_NE(g, nullptr);
  EXPECT_FALSE(g->passed);
  EXPECT_EQ(g->offending_ids.size(), 48u) << g->evidence;  // every prompt that shares a prefix
  EXPECT_NE(g->evidence.find("hit ratio served 0.0%"), std::string::npos) << g->evidence;
  EXPECT_TRUE(Gate(rep.verdict, "verify_cold")->passed);
}

// Every later turn's body, read back from the raw evidence, against the text the evidence shows
// the server streamed in the turn before.
TEST(TrialReuse, ASessionsLaterTurnResendsExactlyTheTextItsPreviousTurnStreamed) {
  Row row = LoadFast("sim_small_sessions.yaml", 40);
  const std::string dir = ScratchDir("sessions");
  auto sim = StartSim(row);
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrial(row, Options(sim->url(), dir + "/trial", 2));
  sim->Stop();
  ASSERT_EQ(rep.verdict.outcome, TrialOutcome::kPass) << rep.verdict.reasons.front();
  EXPECT_TRUE(Gate(rep.verdict, "session_history")->passed);
  EXPECT_TRUE(Gate(rep.verdict, "cache_reuse")->passed)
      << Gate(rep.verdict, "cache_reuse")->evidence;
  ASSERT_EQ(rep.verdict.classes.size(), 4u);
  EXPECT_EQ(rep.verdict.classes[3].name, "turn4");
  EXPECT_EQ(rep.verdict.classes[3].requests, 20);

  Result<TrialPlan> plan = PlanFromJson(ReadJson(dir + "/trial/plan.json"));
  ASSERT_TRUE(plan.ok());
  Result<RawEvidenceFile> raw = ReadRawRecords(RawPath(dir + "/trial"));
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  std::map<std::string, std::string> streamed, body;
  for (const RawRecord& r : raw->records) {
    streamed[r.id] = DecodeRecord(r).output_text;
    body[r.id] = r.request_body;
  }
  std::map<std::pair<int, int>, const PlanRequest*> turn;
  for (const PlanRequest& r : plan->measured) turn[{r.session, r.turn}] = &r;
  int checked = 0;
  for (const PlanRequest& r : plan->measured) {
    if (r.turn == 1) {
      EXPECT_TRUE(body[r.id].empty()) << r.id << ": turn 1 sends the plan's body";
      continue;
    }
    const nlohmann::json sent = nlohmann::json::parse(body[r.id]);
    const auto& messages = sent["messages"];
    ASSERT_EQ(messages.size(), static_cast<size_t>(2 * r.turn - 1)) << r.id;
    const PlanRequest& prev = *turn.at({r.session, r.turn - 1});
    ASSERT_FALSE(streamed[prev.id].empty());
    EXPECT_EQ(messages[2 * r.turn - 3]["role"], "assistant");
    EXPECT_EQ(messages[2 * r.turn - 3]["content"], streamed[prev.id]) << r.id;
    EXPECT_EQ(messages[2 * r.turn - 2]["content"], r.prompt.text) << r.id;
    ++checked;
  }
  EXPECT_EQ(checked, 60);

  const nlohmann::json reuse = ReadJson(dir + "/trial/metrics.json")["reuse"];
  EXPECT_EQ(reuse["think_turns"], 60);
  EXPECT_GE(reuse["think_applied_mean_s"].get<double>(),
            reuse["think_declared_mean_s"].get<double>());
  auto v = ValidateTrialDir(dir + "/trial");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->problems.empty()) << v->problems.front();
  EXPECT_TRUE(v->verdict.correctness.Find("session_history")->passed);
  EXPECT_EQ(v->verdict.classes.size(), 4u);
}

// A sub-agent runs beside its parent on the server: its first turn goes out its start offset after
// the parent's first, before the parent's last turn ends, and the next top-level session waits for
// the parent, not for it.
TEST(TrialReuse, ASubAgentRunsBesideItsParentOnTheServer) {
  Row row = LoadFast("sim_small_agent.yaml", 40);
  const auto turn = [](const std::string& session, int t, double delay, const std::string& extra) {
    return "{\"schema\":\"capq/trajectory/v1\",\"session\":\"" + session +
           "\",\"turn\":" + std::to_string(t) +
           ",\"input_tokens\":64,\"output_tokens\":16,\"tool_delay_s\":" + std::to_string(delay) +
           extra + "}\n";
  };
  // p: two turns 4 s (100 ms wall) apart; its sub-agent p/a 0.8 s (20 ms wall) after its start;
  // then q.
  const std::string text = turn("p", 1, 4, "") + turn("p", 2, 0, "") +
                           turn("p/a", 1, 0, ",\"parent\":\"p\",\"start_offset_s\":0.8") +
                           turn("q", 1, 0, "");
  std::vector<PathStart> starts;
  Result<std::vector<std::vector<TurnShape>>> paths = ParseTrajectory(text, "nested", &starts);
  ASSERT_TRUE(paths.ok()) << paths.status().ToString();
  row.sessions->paths = *paths;
  row.sessions->starts = starts;
  row.measured = Measured{4, 1};
  const std::string dir = ScratchDir("subagent");
  auto sim = StartSim(row);
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrial(row, Options(sim->url(), dir + "/trial", 1));
  sim->Stop();
  std::map<std::string, std::pair<int64_t, int64_t>> at;  // id -> (start_ns, end_ns)
  std::ifstream in(dir + "/trial/results.jsonl");
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("id") && j.contains("start_ns")) {
      at[j["id"]] = {j["start_ns"].get<int64_t>(), j["end_ns"].get<int64_t>()};
    }
  }
  // m0, m1: p's turns; m2: p/a's; m3: q's.
  ASSERT_EQ(at.count("m0") + at.count("m1") + at.count("m2") + at.count("m3"), 4u);
  EXPECT_GE(at["m2"].first - at["m0"].first, 19'000'000);
  EXPECT_LT(at["m2"].first, at["m1"].second) << "the sub-agent waited for its parent";
  EXPECT_GE(at["m3"].first, at["m1"].second) << "q took a place the parent still held";
}

// A trajectory replayed as whole recorded prompts (sessions.prefix_blocks): every turn's body is
// the plan's, the server is held to the reuse the trace's blocks declare and to every turn's
// prompt length, the trial records what it sent beside the trace, and validate agrees.
TEST(TrialReuse, WholePromptTurnsAreServedTheTracesReuseAndTheirPlannedLengths) {
  Row row = LoadFast("sim_small_weka_agent.yaml", 40);
  row.measured = Measured{42, 1};  // trace_0001's 41 turns and trace_0002's 33
  row.slo[0].percentile = 50;      // two first turns hold a median (validate reloads the row)
  const std::string dir = ScratchDir("block_sessions");
  auto sim = StartSim(row);
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrial(row, Options(sim->url(), dir + "/trial", 1));
  sim->Stop();
  ASSERT_EQ(rep.verdict.outcome, TrialOutcome::kPass) << rep.verdict.reasons.front();
  EXPECT_FALSE(Gate(rep.verdict, "session_history")->enabled);
  const GateResult* reuse = Gate(rep.verdict, "cache_reuse");
  EXPECT_TRUE(reuse->passed) << reuse->evidence;
  EXPECT_NE(reuse->evidence.find("over 74 measured requests"), std::string::npos)
      << reuse->evidence;
  const GateResult* prompt = Gate(rep.verdict, "prompt_tokens");
  EXPECT_TRUE(prompt->passed && prompt->enabled) << prompt->evidence;
  Result<TrialPlan> plan = PlanFromJson(ReadJson(dir + "/trial/plan.json"));
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->measured.size(), 74u);
  EXPECT_GT(*plan->measured[40].declared_cached_tokens, 0);
  EXPECT_EQ(*plan->measured[41].declared_cached_tokens, 0) << "trace_0002 shares nothing";
  const nlohmann::json sent = ReadJson(dir + "/trial/metrics.json")["sent"]["requests"];
  ASSERT_EQ(sent.size(), 74u);
  for (size_t i = 0; i < sent.size(); ++i) {  // [input, output, send_s]; 51 template tokens
    EXPECT_EQ(sent[i][0].get<int64_t>(), plan->measured[i].prompt.message_tokens + 51)
        << plan->measured[i].id;
  }
  ASSERT_EQ(rep.verdict.classes.size(), 2u);
  EXPECT_EQ(rep.verdict.classes[1].name, "later");
  EXPECT_EQ(rep.verdict.classes[1].requests, 72);
  auto v = ValidateTrialDir(dir + "/trial");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->problems.empty()) << v->problems.front();
  EXPECT_TRUE(v->verdict.correctness.Find("cache_reuse")->passed);
}

TEST(TrialReuse, WithThePrefixCacheOffSessionsFailCacheReuse) {
  Row row = LoadFast("sim_small_sessions.yaml", 40);
  const std::string dir = ScratchDir("sessions-off");
  auto sim = StartWithoutPrefixCache(&row, dir);
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrial(row, Options(sim->url(), dir + "/trial", 2));
  sim->Stop();
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kSloFail);
  EXPECT_FALSE(Gate(rep.verdict, "cache_reuse")->passed);
  EXPECT_EQ(Gate(rep.verdict, "cache_reuse")->offending_ids.size(), 60u);
  EXPECT_TRUE(Gate(rep.verdict, "session_history")->passed);
}

// What the reuse gates are given for a later turn comes from the evidence of the turns before it;
// a turn whose earlier turn has no record can pass neither gate.
TEST(TrialReuse, ALaterTurnWithoutItsEarlierTurnsEvidenceCanPassNeitherGate) {
  Row row = LoadFast("sim_small_sessions.yaml", 40);
  PlanInputs in;
  in.level = 1;
  Result<TrialPlan> plan = MakeTrialPlan(row, in);
  ASSERT_TRUE(plan.ok());
  std::vector<RequestResult> measured;
  for (const char* id : {"m0", "m1", "m3"}) {  // m2 (session 0, turn 3) left no record
    RequestResult r;
    r.id = id;
    r.prompt_tokens = 600;
    r.completion_tokens = 64;
    r.content_sha256 = std::string("text of ") + id;
    measured.push_back(r);
  }
  ValidationInput vin;
  internal::ExpectReuse(row, *plan, measured, &vin);
  EXPECT_TRUE(vin.reuse_row && vin.session_row);
  EXPECT_EQ(vin.declared_cached_tokens.at("m0"), 0);
  EXPECT_EQ(vin.declared_cached_tokens.at("m1"), 664);
  ASSERT_EQ(vin.expected_history.at("m1").size(), 3u);
  EXPECT_EQ(vin.expected_history.at("m1")[1], "assistant:text of m0");
  EXPECT_EQ(vin.expected_history.at("m3"),
            std::vector<std::string>{"missing: turn 3 of session 0 has no record"});
  EXPECT_EQ(vin.declared_cached_tokens.count("m3"), 0u);
}

}  // namespace
}  // namespace capq
