#include "capq/measurement/validator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../../harness/src/measurement/validator_internal.h"

namespace capq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A clean trial: 2 warm-up and 4 measured requests of 4 tokens each, all gates green.
class ValidatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    row_.workload.output_tokens = 4;
    row_.warmup.requests = 2;
    row_.measured.min_requests = 4;
    row_.measured.per_concurrency = 1;
    in_.row = &row_;
    in_.level = 2;
    in_.expected_measured = 4;
    in_.cold_prefix_tokens_allowed = 2;
    in_.cold_counter_available = true;
    for (int i = 0; i < 2; ++i) {
      in_.warmup.push_back(Good("w" + std::to_string(i), Phase::kWarmup, i));
      in_.warmup_prompt_hashes.push_back("warm-hash-" + std::to_string(i));
    }
    for (int i = 0; i < 4; ++i) {
      const std::string id = "m" + std::to_string(i);
      in_.measured.push_back(Good(id, Phase::kMeasured, i));
      in_.measured_prompt_hashes.push_back("meas-hash-" + std::to_string(i));
      in_.recounted_tokens[id] = 4;
      in_.expected_prompt_tokens[id] = 50;
    }
    in_.recount_method = "test tokenizer";
    in_.served_model_name = "M";
  }

  static RequestResult Good(const std::string& id, Phase phase, int index) {
    RequestResult r;
    r.id = id;
    r.phase = phase;
    r.index = index;
    r.http_status = 200;
    r.start_ns = 1000 + index;
    r.completion_tokens = 4;
    r.prompt_tokens = 50;
    r.cached_tokens = 1;
    r.finish_reason = "length";
    r.saw_done = true;
    r.nonempty_chunks = 4;
    r.output_utf8_bytes = 20;
    r.output_sha256 = Sha256Hex(id);
    r.models = {"M"};
    return r;
  }

  const GateResult& Gate(const std::string& name) {
    report_ = Validate(in_);
    const GateResult* g = report_.Find(name);
    EXPECT_NE(g, nullptr) << name;
    static const GateResult kMissing;
    return g ? *g : kMissing;
  }

  Row row_;
  ValidationInput in_;
  CorrectnessReport report_;
};

TEST_F(ValidatorTest, CleanTrialPassesEveryGateWithTotals) {
  CorrectnessReport r = Validate(in_);
  ASSERT_EQ(r.gates.size(), std::size(kGateNames));
  for (size_t i = 0; i < r.gates.size(); ++i) {
    EXPECT_EQ(r.gates[i].name, kGateNames[i]);
    // The reuse gates judge rows that declare reuse only.
    const bool reuse_gate =
        r.gates[i].name == "cache_reuse" || r.gates[i].name == "session_history";
    EXPECT_EQ(r.gates[i].enabled, !reuse_gate) << r.gates[i].name;
    EXPECT_TRUE(r.gates[i].passed) << r.gates[i].name << ": " << r.gates[i].evidence;
    EXPECT_TRUE(r.gates[i].offending_ids.empty()) << r.gates[i].name;
  }
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(r.totals.streams, 4);
  EXPECT_EQ(r.totals.completion_tokens, 16);
  EXPECT_EQ(r.totals.nonempty_chunks, 16);
  EXPECT_EQ(r.totals.utf8_bytes, 80);
  EXPECT_EQ(r.totals.unique_output_hashes, 4);
  EXPECT_EQ(r.totals.warmup_prompts, 2);
  EXPECT_EQ(r.totals.measured_prompts, 4);
  EXPECT_EQ(r.Find("nonempty_deltas")->evidence,
            "4 of 4 streams carried non-empty content or reasoning deltas (16 non-empty chunks)");
  nlohmann::json j = CorrectnessToJson(r);
  EXPECT_TRUE(j["passed"].get<bool>());
  EXPECT_EQ(j["gates"].size(), std::size(kGateNames));
  EXPECT_EQ(j["totals"]["unique_output_hashes"], 4);
}

TEST_F(ValidatorTest, ExpectedRecordCount) {
  in_.measured.pop_back();
  in_.measured_prompt_hashes.pop_back();
  const GateResult& g = Gate("expected_record_count");
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(
      g.evidence,
      "3 measured records (want 4), 2 warm-up records (want 2); missing measured indices: #3");
  EXPECT_FALSE(report_.passed());
}

// Fail fast: m2 broke, m3 was cut by the harness. Only m2 is the server's failure; the plan's
// gates still see every planned request.
TEST_F(ValidatorTest, RequestsTheHarnessCutAreNotTheServersFailures) {
  in_.measured[2].http_status = 500;
  in_.measured[2].errors = {"HTTP status 500"};
  RequestResult& cut = in_.measured[3];
  cut.cancelled = true;
  cut.completion_tokens.reset();
  cut.finish_reason.clear();
  cut.nonempty_chunks = 0;
  cut.cancelled_by_harness = "fail_fast after m2";
  cut.transport_error = "cancelled by the harness: fail_fast after m2";
  cut.errors = {"transport error: cancelled by the harness: fail_fast after m2"};
  const std::string note =
      "; 1 request cut or never sent by the harness (fail_fast after m2) is not the server's "
      "failure";
  const GateResult& status = Gate("status_200");
  EXPECT_EQ(status.offending_ids, std::vector<std::string>{"m2"});
  EXPECT_THAT(status.evidence, HasSubstr(note));
  EXPECT_TRUE(Gate("no_cancellations").passed) << Gate("no_cancellations").evidence;
  EXPECT_EQ(Gate("zero_errors").offending_ids, std::vector<std::string>{"m2"});
  EXPECT_TRUE(Gate("finish_reason").passed) << Gate("finish_reason").evidence;
  EXPECT_TRUE(Gate("expected_record_count").passed) << Gate("expected_record_count").evidence;
  EXPECT_TRUE(Gate("unique_prompts").passed) << Gate("unique_prompts").evidence;
  EXPECT_EQ(report_.totals.streams, 3);
}

TEST_F(ValidatorTest, Status200) {
  in_.measured[1].http_status = 500;
  in_.measured[3].http_status = 0;
  const GateResult& g = Gate("status_200");
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.evidence,
            "2 of 4 measured requests did not return HTTP 200: m1 (500), m3 (no response)");
  EXPECT_THAT(g.offending_ids, ElementsAre("m1", "m3"));
}

TEST_F(ValidatorTest, NoCancellations) {
  in_.measured[0].cancelled = true;
  in_.measured[2].cancelled = in_.measured[2].timed_out = true;
  const GateResult& g = Gate("no_cancellations");
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.evidence,
            "2 of 4 measured requests did not complete normally: m0 (cut), m2 (timed out)");
}

TEST_F(ValidatorTest, ZeroErrorsCountsWarmupToo) {
  in_.warmup[1].errors = {"event #3 at +5.000 ms: malformed JSON (4 bytes): {\"a\""};
  in_.measured[2].errors = {"no usage object in the stream (server token counts unknown)", "x"};
  const GateResult& g = Gate("zero_errors");
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.evidence,
            "3 errors in 2 of 6 requests: w1 (event #3 at +5.000 ms: malformed JSON (4 bytes): "
            "{\"a\"), m2 (no usage object in the stream (server token counts unknown); +1 more)");
  EXPECT_THAT(g.offending_ids, ElementsAre("w1", "m2"));
}

TEST_F(ValidatorTest, ExactCompletionTokens) {
  in_.measured[1].completion_tokens = 3;
  in_.measured[2].completion_tokens.reset();
  const GateResult& g = Gate("exact_completion_tokens");
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.evidence,
            "2 of 4 streams reported server completion_tokens other than 4: m1 (3, want 4), "
            "m2 (none, want 4)");
}

TEST_F(ValidatorTest, ExactCompletionTokensPerRequestExpectation) {
  in_.expected_completion_tokens["m0"] = 5;
  in_.measured[0].completion_tokens = 5;
  EXPECT_TRUE(Gate("exact_completion_tokens").passed);
  in_.measured[0].completion_tokens = 4;
  EXPECT_FALSE(Gate("exact_completion_tokens").passed);
}

TEST_F(ValidatorTest, FinishReasonOneWrongValue) {
  in_.measured[1].finish_reason = "stop";
  in_.measured[3].finish_reason = "stop";
  const GateResult& g = Gate("finish_reason");
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.evidence, "2 of 4 streams ended with finish_reason 'stop' (want 'length'): m1, m3");
}

TEST_F(ValidatorTest, FinishReasonSeveralValues) {
  in_.measured[0].finish_reason = "";
  in_.measured[2].finish_reason = "abort";
  const GateResult& g = Gate("finish_reason");
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(
      g.evidence,
      "2 of 4 streams ended with a finish_reason other than 'length' (none: m0; 'abort': m2)");
}

TEST_F(ValidatorTest, NonemptyDeltas) {
  in_.measured[2].nonempty_chunks = 0;
  const GateResult& g = Gate("nonempty_deltas");
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.evidence, "1 of 4 streams carried no non-empty content or reasoning delta: m2");
}

TEST_F(ValidatorTest, UniquePrompts) {
  in_.measured_prompt_hashes[3] = in_.measured_prompt_hashes[1];
  in_.warmup_prompt_hashes[1] = in_.warmup_prompt_hashes[0];
  const GateResult& g = Gate("unique_prompts");
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(
      g.evidence,
      "2 prompts repeat another among 4 measured and 2 warm-up prompt hashes: w0 = w1, m1 = m3");
  EXPECT_THAT(g.offending_ids, ElementsAre("w0", "w1", "m1", "m3"));
}

TEST_F(ValidatorTest, UniquePromptsFailsClosedWithoutHashes) {
  in_.measured_prompt_hashes.clear();
  const GateResult& g = Gate("unique_prompts");
  EXPECT_FALSE(g.passed);
  EXPECT_THAT(g.evidence, HasSubstr("cannot check: 0 measured and 2 warm-up prompt hashes"));
}

TEST_F(ValidatorTest, UniqueOutputs) {
  in_.measured[2].output_sha256 = in_.measured[0].output_sha256;
  const GateResult& g = Gate("unique_outputs");
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.evidence, "3 unique output hashes over 4 streams; identical outputs: m0 = m2");
  EXPECT_EQ(report_.totals.unique_output_hashes, 3);
}

TEST_F(ValidatorTest, WarmupDisjoint) {
  in_.measured_prompt_hashes[2] = in_.warmup_prompt_hashes[1];
  const GateResult& g = Gate("warmup_disjoint");
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.evidence, "1 of 4 measured prompts were also used in warm-up: m2 = w1");
  EXPECT_THAT(g.offending_ids, ElementsAre("m2"));
}

TEST_F(ValidatorTest, VerifyColdCachedTokensAboveSharedPrefix) {
  in_.measured[1].cached_tokens = 40;
  const GateResult& g = Gate("verify_cold");
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.evidence,
            "1 of 4 measured requests showed more cached prompt tokens than the 2 shared template "
            "tokens allowed: m1 (40)");
}

TEST_F(ValidatorTest, VerifyColdFailsClosedWithoutCounter) {
  for (auto& r : in_.measured) r.cached_tokens.reset();
  in_.cold_counter_available = false;
  const GateResult& g = Gate("verify_cold");
  EXPECT_TRUE(g.enabled);
  EXPECT_FALSE(g.passed);
  EXPECT_THAT(g.evidence, HasSubstr("no counter"));
  EXPECT_THAT(g.evidence, HasSubstr("4 of 4 measured requests (m0, m1, m2, m3)"));
  EXPECT_FALSE(report_.passed());
}

TEST_F(ValidatorTest, VerifyColdFallsBackToServerCounters) {
  for (auto& r : in_.measured) r.cached_tokens.reset();
  in_.server_cached_tokens_total = 8;  // 2 allowed × 4 requests
  EXPECT_TRUE(Gate("verify_cold").passed) << Gate("verify_cold").evidence;
  in_.server_cached_tokens_total = 9;
  const GateResult& g = Gate("verify_cold");
  EXPECT_FALSE(g.passed);
  EXPECT_THAT(g.evidence, HasSubstr("9 cached prompt tokens (allowed 2 x 4 requests = 8)"));
}

// A counter read before the warm-up ended also holds the warm-up's template-prefix hits.
TEST_F(ValidatorTest, VerifyColdCountsTheWarmupTheCounterWindowHolds) {
  for (auto& r : in_.measured) r.cached_tokens.reset();
  in_.server_cached_tokens_total = 10;
  EXPECT_FALSE(Gate("verify_cold").passed) << Gate("verify_cold").evidence;
  in_.server_cached_window_requests = 5;  // 1 warm-up request and the 4 measured
  const GateResult& g = Gate("verify_cold");
  EXPECT_TRUE(g.passed) << g.evidence;
  EXPECT_THAT(g.evidence, HasSubstr("warm-up and measured phases: 10 cached prompt tokens "
                                    "(allowed 2 x 5 requests = 10)"));
}

TEST_F(ValidatorTest, RowDisabledGateIsReportedWithReasonAndDoesNotFailTheTrial) {
  row_.correctness.unique_outputs.enabled = false;
  row_.correctness.unique_outputs.reason_off = "outputs are deterministic per prompt family";
  in_.measured[1].output_sha256 = in_.measured[0].output_sha256;
  const GateResult& g = Gate("unique_outputs");
  EXPECT_FALSE(g.enabled);
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.evidence,
            "disabled by the row: outputs are deterministic per prompt family; observed: 3 unique "
            "output hashes over 4 streams; identical outputs: m0 = m1");
  EXPECT_TRUE(report_.passed());
}

TEST_F(ValidatorTest, VerifyColdDisabledByCachePolicy) {
  row_.cache.verify_cold = false;
  for (auto& r : in_.measured) r.cached_tokens.reset();
  in_.cold_counter_available = false;
  const GateResult& g = Gate("verify_cold");
  EXPECT_FALSE(g.enabled);
  EXPECT_THAT(g.evidence, HasSubstr("disabled by the row: the row sets cache.verify_cold: false"));
  EXPECT_TRUE(report_.passed());
}

TEST(Validator, NoRowFailsEveryGate) {
  ValidationInput in;
  CorrectnessReport r = Validate(in);
  EXPECT_FALSE(r.passed());
  ASSERT_EQ(r.gates.size(), std::size(kGateNames));
  EXPECT_FALSE(r.gates[0].passed);
}

TEST(Validator, EmptyReportIsNotAPass) { EXPECT_FALSE(CorrectnessReport{}.passed()); }

}  // namespace
}  // namespace capq

namespace capq {
namespace {

class CountsProveTextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    row_.workload.output_tokens = 32;
    in_.row = &row_;
    in_.served_model_name = "tiny-llama";
    for (int i = 0; i < 3; ++i) {
      RequestResult r;
      r.id = "m" + std::to_string(i);
      r.http_status = 200;
      r.completion_tokens = 32;
      r.prompt_tokens = 522;
      r.nonempty_chunks = 32;
      r.models = {"tiny-llama"};
      in_.measured.push_back(r);
      in_.recounted_tokens[r.id] = 31;  // retokenizing decoded text is close, not exact
      in_.expected_prompt_tokens[r.id] = 522;
    }
    in_.recount_method = "test";
  }
  GateResult Run(GateResult (*gate)(const ValidationInput&)) { return gate(in_); }
  Row row_;
  ValidationInput in_;
};

TEST_F(CountsProveTextTest, UsageClaimingTwiceTheStreamedTextFailsTextRecount) {
  EXPECT_TRUE(validator_internal::TextRecount(in_).passed);
  // The server says 32 tokens, its stream carries text for 16: 16 chunks, re-counted to 16.
  in_.measured[1].nonempty_chunks = 16;
  in_.recounted_tokens["m1"] = 16;
  GateResult g = validator_internal::TextRecount(in_);
  EXPECT_FALSE(g.passed);
  EXPECT_NE(g.evidence.find("m1 (usage says 32, the text re-counts to 16)"), std::string::npos)
      << g.evidence;
}

// A healthy server may put several tokens in one chunk (a stream interval, a speculative step, an
// API server that merges what a slow reader left pending): the count of chunks proves nothing,
// the re-count decides.
TEST_F(CountsProveTextTest, SeveralTokensPerChunkPassWhenTheTextHoldsThem) {
  in_.measured[1].nonempty_chunks = 11;  // 3 tokens per chunk, 32 tokens
  GateResult g = validator_internal::TextRecount(in_);
  EXPECT_TRUE(g.passed) << g.evidence;
  EXPECT_NE(g.evidence.find("at most 2.9 tokens per chunk with text"), std::string::npos)
      << g.evidence;
  in_.recounted_tokens["m1"] = 16;  // and half the text fails, whatever the chunks
  EXPECT_FALSE(validator_internal::TextRecount(in_).passed);
}

TEST_F(CountsProveTextTest, NoTokenizerFailsClosedUnlessTheRowSwitchesItOff) {
  in_.recount_unavailable = "the server has no /tokenize";
  GateResult g = validator_internal::TextRecount(in_);
  EXPECT_FALSE(g.passed);
  EXPECT_NE(g.evidence.find("fail closed"), std::string::npos);
  row_.correctness.text_recount = {false, "the engine has no tokenizer endpoint"};
  CorrectnessReport rep = Validate(in_);
  const GateResult* off = rep.Find("text_recount");
  ASSERT_NE(off, nullptr);
  EXPECT_FALSE(off->enabled);
}

TEST_F(CountsProveTextTest, APromptCutToAQuarterFailsPromptTokensWithBothNumbers) {
  EXPECT_TRUE(validator_internal::PromptTokens(in_).passed);
  in_.measured[2].prompt_tokens = 522 + 3;  // an edge merge: within the tolerance of 4
  EXPECT_TRUE(validator_internal::PromptTokens(in_).passed);
  in_.measured[0].prompt_tokens = 132;
  GateResult g = validator_internal::PromptTokens(in_);
  EXPECT_FALSE(g.passed);
  EXPECT_NE(g.evidence.find("m0 (server counted 132, planned 522)"), std::string::npos)
      << g.evidence;
  in_.prompt_expectation_unavailable = "no template";
  EXPECT_FALSE(validator_internal::PromptTokens(in_).passed);
}

TEST_F(CountsProveTextTest, AChunkNamingAnotherModelFailsModelName) {
  EXPECT_TRUE(validator_internal::ModelName(in_).passed);
  in_.measured[2].models = {"tiny-llama", "other-model"};
  GateResult g = validator_internal::ModelName(in_);
  EXPECT_FALSE(g.passed);
  EXPECT_NE(g.evidence.find("m2 ('other-model')"), std::string::npos) << g.evidence;
}

// A prefix row: m0 and m1 share a 40-token prefix, m2 and m3 are unique; the warm-ups are the
// unique prompts verify_cold judges.
class ReuseValidatorTest : public ValidatorTest {
 protected:
  void SetUp() override {
    ValidatorTest::SetUp();
    row_.prefix = PrefixReuse{};
    in_.reuse_row = true;
    in_.reuse_tolerance.tokens = 4;
    in_.reuse_tolerance.ratio_pct = 2;
    for (int i = 0; i < 4; ++i) {
      const int64_t declared = i < 2 ? 40 : 0;
      in_.declared_cached_tokens["m" + std::to_string(i)] = declared;
      in_.measured[i].cached_tokens = i < 2 ? declared + 1 : 0;
    }
  }
};

TEST_F(ReuseValidatorTest, ServedAsDeclaredPasses) {
  const GateResult& g = Gate("cache_reuse");
  EXPECT_TRUE(g.enabled);
  EXPECT_TRUE(g.passed) << g.evidence;
  EXPECT_THAT(g.evidence, HasSubstr("hit ratio served 41.0%, declared 40.0%"));
  EXPECT_TRUE(Gate("verify_cold").passed) << Gate("verify_cold").evidence;
}

TEST_F(ReuseValidatorTest, FewerHitsThanDeclaredFailByRequest) {
  // A cache that is off, evicted or on another replica serves only the template.
  in_.measured[0].cached_tokens = 1;
  in_.measured[1].cached_tokens = 1;
  const GateResult& g = Gate("cache_reuse");
  EXPECT_FALSE(g.passed);
  EXPECT_THAT(g.offending_ids, ElementsAre("m0", "m1"));
  EXPECT_THAT(g.evidence, HasSubstr("m0 (1 cached, declared 40)"));
  EXPECT_THAT(g.evidence, HasSubstr("within 2.0% points: no"));
}

// A per-slot engine (llama.cpp) whose adapter explains misses: two requests sharing a prefix that
// ran together took different slots, so one of them missed. The served ratio still holds, so the
// trial passes and says which requests missed and why; a cache that serves far fewer hits than
// declared still fails on the ratio.
TEST_F(ReuseValidatorTest, MissesTheEnginesCacheModelExplainsAreReportedNotFailed) {
  for (int i = 0; i < 40; ++i) {  // 40 more requests that share the prefix, served as declared
    RequestResult r = in_.measured[0];
    r.id = "s" + std::to_string(i);
    in_.measured.push_back(r);
    in_.declared_cached_tokens[r.id] = 40;
  }
  in_.measured[1].cached_tokens = 4;  // m1 missed its prefix: another slot held it
  in_.miss_hint = "a per-slot cache";
  const GateResult& g = Gate("cache_reuse");
  EXPECT_TRUE(g.passed) << g.evidence;
  EXPECT_TRUE(g.offending_ids.empty());
  EXPECT_THAT(g.evidence, HasSubstr("1 of 44 requests missed their declared reuse: m1 (4 cached, "
                                    "declared 40) (reported, not failed: a per-slot cache)"));
  EXPECT_THAT(g.evidence, HasSubstr("points: yes"));
  // Without the explanation the same miss fails, unless the row allows that share.
  in_.miss_hint.clear();
  const GateResult& strict = Gate("cache_reuse");
  EXPECT_FALSE(strict.passed);
  EXPECT_THAT(strict.offending_ids, ElementsAre("m1"));
  EXPECT_THAT(strict.evidence, HasSubstr("(not allowed: 2.3% of measured requests, the row "
                                         "allows 0.0%)"));
  in_.reuse_tolerance.misses_pct = 5;
  const GateResult& allowed = Gate("cache_reuse");
  EXPECT_TRUE(allowed.passed) << allowed.evidence;
  EXPECT_THAT(allowed.evidence, HasSubstr("within the row's allowance"));
  // Far fewer hits: the explanation does not save a ratio off by more than its tolerance.
  in_.miss_hint = "a per-slot cache";
  for (int i = 0; i < 20; ++i) in_.measured[4 + i].cached_tokens = 4;
  const GateResult& fewer = Gate("cache_reuse");
  EXPECT_FALSE(fewer.passed);
  EXPECT_THAT(fewer.evidence, HasSubstr("points: no"));
}

TEST_F(ReuseValidatorTest, MoreHitsThanDeclaredFailToo) {
  in_.measured[2].cached_tokens = 30;  // a unique prompt served from the cache: not this row
  in_.miss_hint = "a per-slot cache";  // explains misses, never a warm cache
  const GateResult& g = Gate("cache_reuse");
  EXPECT_FALSE(g.passed);
  EXPECT_THAT(g.offending_ids, ElementsAre("m2"));
  EXPECT_THAT(g.evidence, HasSubstr("served more than [declared - 4"));
  // The cold check covers the unique measured prompts of a reuse row as well as the warm-ups.
  EXPECT_FALSE(Gate("verify_cold").passed);
  EXPECT_THAT(Gate("verify_cold").offending_ids, ElementsAre("m2"));
}

TEST_F(ReuseValidatorTest, NoCounterFailsClosed) {
  in_.measured[1].cached_tokens.reset();
  const GateResult& g = Gate("cache_reuse");
  EXPECT_FALSE(g.passed);
  EXPECT_THAT(g.evidence, HasSubstr("fail closed"));
}

TEST_F(ReuseValidatorTest, TheTotalRatioIsGatedBesideEachRequest) {
  // Every request inside its own band (+4), yet the trial's ratio drifts past 2 points.
  in_.reuse_tolerance.tokens = 6;
  for (auto& r : in_.measured) *r.cached_tokens += 5;
  const GateResult& g = Gate("cache_reuse");
  EXPECT_FALSE(g.passed);
  EXPECT_TRUE(g.offending_ids.empty());
  EXPECT_THAT(g.evidence, HasSubstr("points: no"));
}

TEST_F(ReuseValidatorTest, SessionHistoryComparesEveryMessage) {
  in_.session_row = true;
  in_.expected_history["m1"] = {"user:a", "assistant:x", "user:b"};
  in_.measured[1].sent_messages = {"user:a", "assistant:x", "user:b"};
  EXPECT_TRUE(Gate("session_history").passed) << Gate("session_history").evidence;
  in_.measured[1].sent_messages = {"user:a", "assistant:y", "user:b"};  // not what was streamed
  const GateResult& g = Gate("session_history");
  EXPECT_FALSE(g.passed);
  EXPECT_THAT(g.offending_ids, ElementsAre("m1"));
  EXPECT_THAT(g.evidence, HasSubstr("m1 (message 1 of 3 differs)"));
}

}  // namespace
}  // namespace capq
