// The decoder against the SGLang and vLLM stream fixtures (tests/data/conformance/{sglang,vllm},
// written from the servers' source; see each README.md). No arrival times were recorded, so each
// HTTP chunk is taken as one read, 10 ms after the previous one: what is checked is the chunk
// shapes (role chunk, text deltas, finish chunk, usage chunk, error frames), not timing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "capq/measurement/decode.h"
#include "capq/measurement/loadgen.h"
#include "wire_replay.h"

namespace capq {
namespace {

using ::testing::HasSubstr;

constexpr MonoNs kStart = 1'000'000'000;
constexpr MonoNs kMs = 1'000'000;

RequestResult Decode(const std::string& engine, const std::string& name) {
  const std::string resp = wire::ReadFile(
      std::string(CAPQ_SOURCE_DIR) + "/tests/data/conformance/" + engine + "/" + name + ".resp");
  const auto reads = wire::ReadPerChunk(resp, kStart + 5 * kMs, 10 * kMs);
  const wire::Replayed w = wire::ReplayWire(name, resp, reads, kStart, reads.back().t);
  EXPECT_TRUE(w.framing_complete) << name;
  return DecodeRecord(w.raw);
}

std::string AllErrors(const RequestResult& r) {
  std::string s;
  for (const auto& e : r.errors) s += e + "\n";
  return s;
}

// Role chunk {"reasoning_content":null,"role":"assistant","content":""}, four text deltas, a
// finish chunk with delta {"reasoning_content":null}, a usage chunk with cached_tokens.
TEST(SglangFixtureStream, UsageChunkAndSeparateFinishChunk) {
  const RequestResult r = Decode("sglang", "10-chat-stream-usage");
  EXPECT_TRUE(r.errors.empty()) << AllErrors(r);
  EXPECT_EQ(r.nonempty_chunks, 4);
  EXPECT_EQ(r.output_text, "Hello, world!");
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_EQ(r.prompt_tokens, 10);
  EXPECT_EQ(r.completion_tokens, 4);
  EXPECT_EQ(r.cached_tokens, 8);
  EXPECT_TRUE(r.saw_done);
  EXPECT_EQ(r.first_event_ns, 15 * kMs);  // the empty role chunk is not the first token
  EXPECT_EQ(r.ttft_ns, 25 * kMs);
  EXPECT_EQ(r.chunks, 7);
}

// An abort with a status: the error frame, then still a usage chunk, then [DONE]. The stream must
// count as failed although it ends with [DONE] and carries usage.
TEST(SglangFixtureStream, MidStreamErrorFrameIsAnErrorDespiteUsageAndDone) {
  const RequestResult r = Decode("sglang", "11-chat-stream-error-midstream");
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_THAT(r.errors[0], HasSubstr("error frame: Request running timeout reached."));
  EXPECT_EQ(r.nonempty_chunks, 2);
  EXPECT_EQ(r.completion_tokens, 2);
  EXPECT_FALSE(r.cached_tokens.has_value());  // prompt_tokens_details: null
  EXPECT_EQ(r.finish_reason, "");
  EXPECT_TRUE(r.saw_done);
}

TEST(SglangFixtureStream, OverContextIsAPlainJson400) {
  const RequestResult r = Decode("sglang", "12-chat-stream-over-context-400");
  EXPECT_EQ(r.http_status, 400);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_THAT(r.errors[0], HasSubstr("is longer than the model's context length"));
}

// vLLM: the last token's text rides on the finish chunk, and the usage chunk has no
// prompt_tokens_details unless --enable-prompt-tokens-details.
TEST(VllmFixtureStream, LastTokenOnTheFinishChunkCounts) {
  const RequestResult r = Decode("vllm", "12-chat-stream-usage");
  EXPECT_TRUE(r.errors.empty()) << AllErrors(r);
  EXPECT_EQ(r.nonempty_chunks, 4);
  EXPECT_EQ(r.output_text, "Hello, world!");
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_EQ(r.prompt_tokens, 10);
  EXPECT_EQ(r.completion_tokens, 4);
  EXPECT_FALSE(r.cached_tokens.has_value());
  EXPECT_TRUE(r.saw_done);
  EXPECT_EQ(r.ttft_ns, 25 * kMs);
  EXPECT_EQ(r.chunks, 6);
}

// GenerationError mid-stream: error frame, no usage, [DONE].
TEST(VllmFixtureStream, MidStreamErrorFrameAndNoUsage) {
  const RequestResult r = Decode("vllm", "13-chat-stream-error-midstream");
  EXPECT_THAT(AllErrors(r), HasSubstr("error frame: Internal server error"));
  EXPECT_THAT(AllErrors(r), HasSubstr("no usage object"));
  EXPECT_EQ(r.nonempty_chunks, 2);
  EXPECT_TRUE(r.saw_done);
}

TEST(VllmFixtureStream, OverContextIsAJson400) {
  const RequestResult r = Decode("vllm", "14-chat-stream-over-context-400");
  EXPECT_EQ(r.http_status, 400);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_THAT(r.errors[0], HasSubstr("maximum context length is 32768 tokens"));
}

}  // namespace
}  // namespace capq
