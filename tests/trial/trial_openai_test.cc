// Engine openai: a generic OpenAI-compatible server, known by /v1/models alone. The simulator
// stands in for one (its vLLM dialect has vLLM's /tokenize, its llama.cpp dialect none of that
// form); every gate that cannot be proven there says so.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "trial_test_util.h"

namespace capq::testing {
namespace {

const std::string kDigest = "sha256:" + std::string(64, 'a');
const std::string kRevision(40, '0');

std::string OpenAiRowYaml(const std::string& cache, const std::string& correctness) {
  return R"(schema: capq/row/v1
id: openai_test_row
identity:
  engine: openai
  image: example/gateway@)" +
         kDigest + R"(
  model: example/model
  model_revision: )" +
         kRevision + R"(
  served_model_name: sim-small
  hardware: loopback
  driver: none
workload:
  input_tokens: 64
  output_tokens: 16
  sampling: {temperature: 0, ignore_eos: true}
  arrival: {kind: closed_loop}
cache: )" +
         cache + R"(
warmup: {requests: 2, concurrency: 1}
measured: {min_requests: 20, per_concurrency: 1}
slo:
  - {metric: ttft, percentile: 95, below_ms: 100000}
trials: {count: 3, quiet_period_s: 0, seeds: [11, 22, 33]}
request_timeout_s: 60
)" + correctness;
}

Row OpenAiRow(const std::string& correctness = "") {
  Result<Row> row = LoadRowFromString(
      OpenAiRowYaml("{prefix_cache: enabled, flush_before_trial: false, verify_cold: true}",
                    correctness),
      std::string(CAPQ_SOURCE_DIR) + "/rows/openai.yaml");
  EXPECT_TRUE(row.ok()) << row.status().ToString();
  return row.ok() ? *row : Row{};
}

std::unique_ptr<sim::SimServer> StartDialect(sim::Dialect d, const std::string& profile = "") {
  sim::ServerOptions o;
  o.profile_path =
      profile.empty() ? std::string(CAPQ_SOURCE_DIR) + "/rows/sim/profiles/small.yaml" : profile;
  o.time_scale = 100;
  o.dialect = d;
  auto s = sim::SimServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

class TrialOpenAi : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("CAPQ_IMAGE_DIGEST", kDigest.c_str(), 1);
    ::setenv("CAPQ_MODEL_REVISION", kRevision.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("CAPQ_IMAGE_DIGEST");
    ::unsetenv("CAPQ_MODEL_REVISION");
  }
};

// A server with vLLM's /tokenize and no cache counter on cold requests: the re-count runs, and
// verify_cold passes on prompt uniqueness alone, saying so.
TEST_F(TrialOpenAi, PassesOnWhatItCanProveAndSaysWhatItCannot) {
  Row row = OpenAiRow();
  auto sim = StartDialect(sim::Dialect::kVllm);
  ASSERT_TRUE(sim);
  const std::string dir = ScratchDir("openai-vllm");
  TrialReport rep = RunTrial(row, Options(sim->url(), dir + "/trial", 2));
  sim->Stop();
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kPass)
      << (rep.verdict.reasons.empty() ? "" : rep.verdict.reasons[0]);
  const GateResult* cold = Gate(rep.verdict, "verify_cold");
  ASSERT_NE(cold, nullptr);
  EXPECT_TRUE(cold->passed);
  EXPECT_EQ(cold->evidence.rfind("not measured: engine openai", 0), 0u) << cold->evidence;
  const GateResult* recount = Gate(rep.verdict, "text_recount");
  ASSERT_NE(recount, nullptr);
  EXPECT_TRUE(recount->passed) << recount->evidence;
  auto v = ValidateTrialDir(dir + "/trial");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->verdict.outcome, TrialOutcome::kPass);
}

// Without a tokenize endpoint of vLLM's or SGLang's form (the llama.cpp dialect's takes
// "content") the re-count and the prompt count fail closed, and a row that turns them off with a
// reason passes with the gates shown as off. The server caches nothing, so its counters prove every
// request cold.
TEST_F(TrialOpenAi, NoTokenizerFailsTheRecountClosedUnlessTheRowTurnsItOff) {
  const std::string dir = ScratchDir("openai-notok");
  std::ifstream small(std::string(CAPQ_SOURCE_DIR) + "/rows/sim/profiles/small.yaml");
  std::stringstream profile;
  // The small profile with its prefix cache off: every request reports 0 cached tokens.
  std::string text((std::istreambuf_iterator<char>(small)), std::istreambuf_iterator<char>());
  text.replace(text.find("prefix_cache: true"), 18, "prefix_cache: false");
  profile << text;
  auto sim = StartDialect(sim::Dialect::kLlamacpp, WriteText(dir + "/profile.yaml", profile.str()));
  ASSERT_TRUE(sim);
  TrialReport closed = RunTrial(OpenAiRow(), Options(sim->url(), dir + "/closed", 2));
  EXPECT_EQ(closed.verdict.outcome, TrialOutcome::kCorrectnessFail);
  const GateResult* g = Gate(closed.verdict, "text_recount");
  ASSERT_NE(g, nullptr);
  EXPECT_FALSE(g->passed);
  EXPECT_NE(g->evidence.find("fail closed"), std::string::npos) << g->evidence;
  // Without a tokenizer the template around a message is unknown too: prompt_tokens is as
  // unprovable, and the row says why it turns both off.
  Row off = OpenAiRow(
      "correctness:\n"
      "  text_recount: {enabled: false, reason: \"the gateway has no tokenizer\"}\n"
      "  prompt_tokens: {enabled: false, reason: \"the gateway renders no template\"}\n");
  TrialOptions second = Options(sim->url(), dir + "/off", 2);
  second.trial_index = 2;  // a corpus of its own, as every trial of a qualification has
  TrialReport rep = RunTrial(off, second);
  sim->Stop();
  for (const char* name : {"text_recount", "prompt_tokens"}) {
    const GateResult* g_off = Gate(rep.verdict, name);
    ASSERT_NE(g_off, nullptr) << name;
    EXPECT_FALSE(g_off->enabled) << name;
  }
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kPass)
      << (rep.verdict.reasons.empty() ? "" : rep.verdict.reasons[0]);
}

TEST(OpenAiRow, AFlushIsRefusedAtLoadNamingTheKey) {
  Result<Row> row = LoadRowFromString(
      OpenAiRowYaml("{prefix_cache: enabled, flush_before_trial: true}", ""), "openai_flush.yaml");
  ASSERT_FALSE(row.ok());
  EXPECT_NE(row.status().message().find("cache.flush_before_trial"), std::string::npos)
      << row.status().message();
  EXPECT_NE(row.status().message().find("no flush endpoint"), std::string::npos);
}

}  // namespace
}  // namespace capq::testing
