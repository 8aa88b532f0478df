// The SSE framer and decoder held to real SGLang and vLLM output (tests/data/conformance/recorded;
// its README.md names each file's source and grade). The recordings keep the SSE body, not its
// HTTP framing or arrival times, so each stream is served as uvicorn sends a StreamingResponse: one
// HTTP chunk per SSE frame, each read 10 ms after the previous one (wire_replay.h). What is checked
// is what the decoder makes of the servers' chunk shapes, not timing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "capq/measurement/decode.h"
#include "capq/measurement/fail_fast.h"
#include "capq/measurement/loadgen.h"
#include "wire_replay.h"

namespace capq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const std::string kDir = std::string(CAPQ_SOURCE_DIR) + "/tests/data/conformance/recorded/";
constexpr MonoNs kStart = 1'000'000'000;
constexpr MonoNs kMs = 1'000'000;

const char kQwenStream[] = "sglang/sugarcrush-qwen3.8-chat-stream-usage-reasoning.sse";
const char kDeepSeekStream[] = "sglang/sugarcrush-deepseek-v4-flash-parallel-toolcalls.sse";
const char kVllmStream[] = "vllm/llamastack-chat-stream-toolcall-qwen3-0.6b.json";
const char kVllmError[] = "vllm/llamastack-error-400-context-length-qwen3-0.6b.json";
const char kKimiCompletion[] = "vllm/selfllm-kimi-k2.5-completions-stop-reason-tokenid.json";

// The SSE frames of a recorded body, each with its terminating blank line.
std::vector<std::string> SplitFrames(const std::string& body) {
  std::vector<std::string> frames;
  for (size_t at = 0; at < body.size();) {
    const size_t end = body.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "an unterminated frame at byte " << at;
    if (end == std::string::npos) break;
    frames.push_back(body.substr(at, end + 2 - at));
    at = end + 2;
  }
  return frames;
}

// An HTTP/1.1 200 event stream carrying `frames`, one HTTP chunk each.
std::string ChunkedSse(const std::vector<std::string>& frames) {
  std::string resp =
      "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  for (const std::string& f : frames) {
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", f.size());
    resp += size + f + "\r\n";
  }
  return resp + "0\r\n\r\n";
}

// The RawRecord the load generator would build from `frames`; `split` > 0 re-splits the reads
// into pieces of that many bytes.
RawRecord ReplayFrames(const std::string& name, const std::vector<std::string>& frames,
                       size_t split = 0) {
  const std::string resp = ChunkedSse(frames);
  std::vector<wire::Read> reads = wire::ReadPerChunk(resp, kStart + 5 * kMs, 10 * kMs);
  if (split > 0) reads = wire::Resplit(reads, split);
  wire::Replayed w = wire::ReplayWire(name, resp, reads, kStart, reads.back().t);
  EXPECT_TRUE(w.framing_complete) << name;
  return std::move(w.raw);
}

RawRecord ReplaySseFile(const std::string& name, size_t split = 0) {
  return ReplayFrames(name, SplitFrames(wire::ReadFile(kDir + name)), split);
}

nlohmann::ordered_json ReadJson(const std::string& name) {
  return nlohmann::ordered_json::parse(wire::ReadFile(kDir + name));
}

std::string AllErrors(const RequestResult& r) {
  std::string s;
  for (const auto& e : r.errors) s += e + "\n";
  return s;
}

// ---- SGLang -------------------------------------------------------------------------------------

// Qwen3.8 with a reasoning parser, cold cache, include_usage (grade A): 28 tokens in 8 text deltas
// (7 reasoning_content, 1 content), a role chunk whose content "" is no text, a finish chunk with
// matched_stop a token id, and a usage chunk whose prompt_tokens_details is null.
TEST(RecordedSglangStream, Qwen38SeveralTokensPerDeltaAndANullCacheCounter) {
  const RawRecord raw = ReplaySseFile(kQwenStream);
  EXPECT_EQ(raw.events.size(), 12u);  // 11 chunks and [DONE]
  const RequestResult r = DecodeRecord(raw);
  EXPECT_TRUE(r.errors.empty()) << AllErrors(r);
  EXPECT_EQ(r.completion_tokens, 28);
  EXPECT_EQ(r.prompt_tokens, 57);
  EXPECT_EQ(r.cached_tokens, std::nullopt);  // "prompt_tokens_details":null
  EXPECT_EQ(r.nonempty_chunks, 8);
  EXPECT_EQ(r.chunks, 11);
  const std::string reasoning =
      "We need to respond to user: \"Reply with exactly: OK\". Need final exactly OK. Ensure no "
      "extra.\n";
  EXPECT_EQ(r.output_text, reasoning + "\n\nOK");
  EXPECT_EQ(r.content_text, "\n\nOK");
  EXPECT_EQ(r.reasoning_bytes, static_cast<int64_t>(reasoning.size()));
  EXPECT_EQ(r.content_bytes, 4);
  EXPECT_EQ(r.output_sha256, Sha256Hex(reasoning + "\n\nOK"));
  EXPECT_EQ(r.content_sha256, Sha256Hex("\n\nOK"));
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_THAT(r.models, ElementsAre("Qwen/Qwen3.8-Flash-Next"));
  EXPECT_TRUE(r.saw_done);
  EXPECT_EQ(r.first_event_ns, 15 * kMs);  // the role chunk
  EXPECT_EQ(r.ttft_ns, 25 * kMs);         // the first reasoning delta
  EXPECT_EQ(r.text_gaps_ms.size(), 7u);
}

// A healthy real stream breaks no gate at once: its integer matched_stop, its null
// prompt_tokens_details and its model name are all in order.
TEST(RecordedSglangStream, Qwen38BreaksNothingWhenFailingFast) {
  const RawRecord raw = ReplaySseFile(kQwenStream);
  FailFastRules rules;
  rules.enabled = true;
  rules.served_model_name = "Qwen/Qwen3.8-Flash-Next";
  const auto b = FindStreamBreak(raw, rules);
  EXPECT_FALSE(b.has_value()) << b->Reason();
}

// DeepSeek-V4-Flash, two parallel tool calls (grade B): "usage":null on the content and tool-call
// chunks, no usage key on the others, and no usage chunk. Null usage is no usage; tool-call
// argument fragments are not text; the second tool call's "index":1 is not a second choice.
TEST(RecordedSglangStream, DeepSeekToolCallsWithNullAndAbsentUsage) {
  const RawRecord raw = ReplaySseFile(kDeepSeekStream);
  EXPECT_EQ(raw.events.size(), 21u);  // 20 chunks and [DONE]
  const RequestResult r = DecodeRecord(raw);
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_THAT(r.errors[0], StartsWith("no usage object in the stream"));
  EXPECT_EQ(r.completion_tokens, std::nullopt);
  EXPECT_EQ(r.prompt_tokens, std::nullopt);
  EXPECT_EQ(r.cached_tokens, std::nullopt);
  EXPECT_EQ(r.nonempty_chunks, 12);  // 9 reasoning deltas, 3 content deltas
  EXPECT_EQ(r.chunks, 20);
  EXPECT_EQ(r.content_text, "I'll get the weather for both cities.\n\n");
  EXPECT_EQ(r.output_text,
            "The user wants weather in Paris and Tokyo. The instructions say to call the tool once "
            "per city, and these are independent calls, so I should make them in the same block."
            "I'll get the weather for both cities.\n\n");
  EXPECT_EQ(r.finish_reason, "tool_calls");
  EXPECT_THAT(r.models, ElementsAre("deepseek-ai/DeepSeek-V4-Flash-0731"));
  EXPECT_TRUE(r.saw_done);
}

// The framer must not depend on where reads split: byte-at-a-time and 7-byte reads of the SGLang
// recordings decode as the per-frame reads do.
TEST(RecordedSglangStream, ReadSplitsDoNotChangeTheDecode) {
  for (const char* name : {kQwenStream, kDeepSeekStream}) {
    SCOPED_TRACE(name);
    const RequestResult want = DecodeRecord(ReplaySseFile(name));
    for (size_t split : {1, 7}) {
      const RequestResult got = DecodeRecord(ReplaySseFile(name, split));
      EXPECT_EQ(got.output_sha256, want.output_sha256);
      EXPECT_EQ(got.content_sha256, want.content_sha256);
      EXPECT_EQ(got.nonempty_chunks, want.nonempty_chunks);
      EXPECT_EQ(got.chunks, want.chunks);
      EXPECT_EQ(got.completion_tokens, want.completion_tokens);
      EXPECT_EQ(got.errors, want.errors);
    }
  }
}

// ---- vLLM ---------------------------------------------------------------------------------------

// The llama-stack recording holds the OpenAI SDK's chunk objects, not the SSE bytes: each object
// is written back as a "data:" frame, and the "[DONE]" vLLM ends every stream with (which the
// recorder does not keep) is added. Key order and values are the file's; the SDK fills the keys
// it declares with null, so only extra keys (stop_reason) tell what the server sent.
std::vector<std::string> VllmStreamFrames(const nlohmann::ordered_json& rec) {
  std::vector<std::string> frames;
  for (const auto& chunk : rec["response"]["body"]) {
    frames.push_back("data: " + chunk["__data__"].dump() + "\n\n");
  }
  frames.push_back("data: [DONE]\n\n");
  return frames;
}

// Qwen3-0.6B on vLLM, a streamed tool call without stream_options: a role chunk (content ""), 102
// one-token content deltas, 7 tool-call argument fragments, a finish chunk (content "",
// "tool_calls"), and no usage, which the request did not ask for.
TEST(RecordedVllmStream, LlamaStackToolCallStream) {
  const nlohmann::ordered_json rec = ReadJson(kVllmStream);
  ASSERT_EQ(rec["response"]["body"].size(), 111u);
  EXPECT_FALSE(rec["request"]["body"].contains("stream_options"));
  const std::vector<std::string> frames = VllmStreamFrames(rec);
  // stop_reason (null) is on the last chunk only: vLLM serialises with exclude_unset.
  for (size_t i = 0; i + 2 < frames.size(); ++i) {
    EXPECT_EQ(frames[i].find("\"stop_reason\""), std::string::npos) << i;
  }
  EXPECT_THAT(frames[frames.size() - 2], HasSubstr("\"stop_reason\":null"));
  const RequestResult r = DecodeRecord(ReplayFrames(kVllmStream, frames));
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_THAT(r.errors[0], StartsWith("no usage object in the stream"));
  EXPECT_EQ(r.completion_tokens, std::nullopt);
  EXPECT_EQ(r.chunks, 111);
  EXPECT_EQ(r.nonempty_chunks, 102);
  EXPECT_EQ(r.reasoning_bytes, 0);  // the <think> text arrives as content on this build
  EXPECT_EQ(r.output_text, r.content_text);
  EXPECT_EQ(
      r.content_text,
      "<think>\nOkay, the user is asking about the weather in San Francisco, CA. I need to use the "
      "get_weather function here. The function requires the location parameter, which in this "
      "case is \"San Francisco, CA\". I should make sure to include both the city and state as "
      "specified. Let me check if there's any other information needed, but the user just wants "
      "the current weather. So, the tool call should be straightforward. I'll format the JSON "
      "correctly within the tool_call tags.\n</think>\n\n");
  EXPECT_THAT(r.output_text, Not(HasSubstr("{\"location\"")));  // argument fragments
  EXPECT_EQ(r.finish_reason, "tool_calls");
  EXPECT_THAT(r.models, ElementsAre("Qwen/Qwen3-0.6B"));
  EXPECT_TRUE(r.saw_done);
  EXPECT_EQ(r.ttft_ns, 25 * kMs);  // the role chunk's content "" is no text
}

// The newer nested 400 over the context, refused on characters. The recording keeps the SDK's
// exception: the inner object, and the body's Python repr showing it wrapped in {"error": ...};
// the body is rebuilt from them. capq parses no error body: the decoder and the fail-fast check
// quote it, and both must still name the server's own words.
TEST(RecordedVllmStream, NestedContextLength400IsQuoted) {
  const nlohmann::ordered_json rec = ReadJson(kVllmError);
  ASSERT_EQ(rec["response"]["exception_data"]["status_code"], 400);
  EXPECT_THAT(rec["response"]["exception_message"].get<std::string>(),
              HasSubstr("{'error': {'message': "));
  const nlohmann::ordered_json body = {{"error", rec["response"]["exception_data"]["body"]}};
  const std::string bytes = body.dump();
  const std::string resp =
      "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
      "content-length: " +
      std::to_string(bytes.size()) + "\r\n\r\n" + bytes;
  const std::vector<wire::Read> reads = {{kStart + 5 * kMs, 0, resp.size()}};
  const RawRecord raw = wire::ReplayWire("400", resp, reads, kStart, kStart + 5 * kMs).raw;
  const RequestResult r = DecodeRecord(raw);
  EXPECT_EQ(r.http_status, 400);
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_THAT(r.errors[0],
              StartsWith("HTTP status 400: {\"error\":{\"message\":\"You passed 894 input "
                         "characters and requested 4096 output tokens."));
  EXPECT_FALSE(r.ttft_ns.has_value());
  EXPECT_FALSE(r.saw_done);
  FailFastRules rules;
  rules.enabled = true;
  const auto b = FindStreamBreak(raw, rules);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->gate, "status_200");
  EXPECT_THAT(b->evidence, HasSubstr("You passed 894 input characters"));
}

// An integer stop_reason (the stop token's id) beside finish_reason "stop". capq sends chat
// requests only and never reads a /v1/completions answer; the place such a stop_reason reaches it
// is a chat finish choice, where the decoder reads finish_reason and the usage beside it. The
// recorded answer is fed as one frame for that: its choice carries "text", not a delta, so it
// holds no text for the chat decoder.
TEST(RecordedVllmStream, IntegerStopReasonIsNoError) {
  const nlohmann::ordered_json rec = ReadJson(kKimiCompletion);
  ASSERT_TRUE(rec["choices"][0]["stop_reason"].is_number_integer());
  const RequestResult r = DecodeRecord(
      ReplayFrames(kKimiCompletion, {"data: " + rec.dump() + "\n\n", "data: [DONE]\n\n"}));
  EXPECT_TRUE(r.errors.empty()) << AllErrors(r);
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_EQ(r.completion_tokens, 343);
  EXPECT_EQ(r.prompt_tokens, 9);
  EXPECT_EQ(r.cached_tokens, std::nullopt);  // "prompt_tokens_details": null
  EXPECT_EQ(r.nonempty_chunks, 0);
}

}  // namespace
}  // namespace capq
