// The chunk scanner reads a plain chunk exactly as the generic parse and the decoder's reading of
// it would, and gives up on everything else: every chunk it accepts, from the servers' shapes and
// from thousands of mutations of them, must parse with nlohmann to the same fields. The decoder's
// results for the chunks it gives up on are the generic reading's.
#include "../../harness/src/measurement/chunk_scan.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "capq/measurement/decode.h"
#include "damage.h"

namespace capq {
namespace {

using internal::ChunkFacts;
using internal::ChunkScratch;
using internal::ScanChunk;

// The servers' shapes (server-apis.md), and texts that need escapes.
const std::vector<std::string>& Chunks() {
  static const std::vector<std::string> chunks = {
      // SGLang, as the simulator writes it: role chunk, text, finish, usage.
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1796339259,"model":"sim-wide","choices":[{"index":0,"delta":{"reasoning_content":null,"role":"assistant","content":""},"logprobs":null,"finish_reason":null,"matched_stop":null}]})",
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"sim-wide","choices":[{"index":0,"delta":{"reasoning_content":null,"content":" rikeko"},"logprobs":null,"finish_reason":null,"matched_stop":null}]})",
      R"({"id":"a","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length","matched_stop":null}]})",
      R"({"id":"a","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"total_tokens":15,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2},"reasoning_tokens":0}})",
      // vLLM: reasoning, null details, continuous usage.
      R"({"id":"b","object":"chat.completion.chunk","created":2,"model":"q","choices":[{"index":0,"delta":{"reasoning":"think"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6,"prompt_tokens_details":null}})",
      // llama.cpp: the choices first, timings with floats.
      R"({"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"created":3,"id":"c","model":"gguf","system_fingerprint":"b1","object":"chat.completion.chunk","usage":{"completion_tokens":4,"prompt_tokens":9,"total_tokens":13},"timings":{"cache_n":7,"prompt_n":2,"prompt_ms":1.25,"predicted_per_second":-0.5}})",
      // Escapes and characters: quotes, backslash, controls, \u (with a surrogate pair), raw UTF-8.
      R"({"model":"m","choices":[{"index":0,"delta":{"content":"say \"hi\"\\ \/ \b\f\n\r\t \u00e9\u6F22\ud83d\ude00 é漢😀"}}]})",
      R"({"model":"m\u00e9","choices":[{"delta":{"content":"x"},"finish_reason":"st\u006fp"}]})",
      R"( { "model" : "m" , "choices" : [ { "delta" : { "content" : "spaced" } } ] } )",
      R"({"choices":[{"delta":{"content":"","reasoning_content":""}}]})",
      R"({"choices":null,"usage":null,"timings":null,"model":null})",
      R"({"choices":[{"index":null,"delta":null,"finish_reason":null}]})",
      R"({"other":{"nested":[1,-2,3.5,0.25,true,false,null,"s",{"a":[[]]}]},"choices":[]})",
      R"({"usage":{}})",
      R"({"usage":{"prompt_tokens":-0,"completion_tokens":123456789012345678}})",
      R"({"\u0063hoices":[{"delta":{"content":"escaped key"}}]})",
      // Unusual but valid: the generic reading decides these.
      R"({"error":{"message":"boom","code":500}})",
      R"({"error":null,"choices":[{"delta":{"content":"no error"}}]})",
      R"({"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]})",
      R"({"choices":[{"index":1,"delta":{"content":"other"}}]})",
      R"({"choices":[{"delta":{"content":5}}]})",
      R"({"choices":[{"delta":{"content":"a","content":"b"}}]})",
      R"({"usage":{"completion_tokens":3.0}})",
      R"({"usage":{"completion_tokens":1234567890123456789}})",
      R"({"usage":{"completion_tokens":3},"x":1e3})",
      "\xEF\xBB\xBF{\"choices\":[]}",
      R"({"choices":"none"})",
      R"({"model":7,"choices":[]})",
      R"({"timings":{"cache_n":2.5}})",
      // Malformed.
      R"({"choices":[{"delta":{"content":"\ud83d"}}]})",
      R"({"choices":[{"delta":{"content":"\ude00"}}]})",
      R"({"choices":[{"delta":{"content":"bad \x escape"}}]})",
      "{\"choices\":[{\"delta\":{\"content\":\"raw \x01 control\"}}]}",
      "{\"choices\":[{\"delta\":{\"content\":\"half \xC3\"}}]}",
      "{\"choices\":[{\"delta\":{\"content\":\"overlong \xC0\xAF\"}}]}",
      R"({"choices":[]} trailing)",
      std::string("{\"choices\":[]}\0after a NUL", 26),
      R"({"usage":{"prompt_tokens":01}})",
      R"({"choices":[],})",
      R"([1,2])",
      R"("a string")",
      "",
  };
  return chunks;
}

// What the decoder takes from a chunk, read from nlohmann's tree as decode.cc reads it.
struct Reference {
  std::string model;
  std::string texts[3];
  std::optional<std::string> finish_reason;
  bool usage = false;
  std::optional<int64_t> prompt_tokens, completion_tokens, cached_tokens, cache_n;
};

std::optional<int64_t> IntOf(const nlohmann::json& o, const char* key) {
  if (!o.is_object() || !o.contains(key) || !o[key].is_number_integer()) return std::nullopt;
  return o[key].get<int64_t>();
}

Reference Read(const nlohmann::json& j) {
  Reference r;
  if (j.contains("model") && j["model"].is_string()) r.model = j["model"];
  if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
    const nlohmann::json& c = j["choices"][0];
    if (c.contains("delta") && c["delta"].is_object()) {
      const char* keys[3] = {"reasoning_content", "reasoning", "content"};
      for (int i = 0; i < 3; ++i) {
        if (c["delta"].contains(keys[i]) && c["delta"][keys[i]].is_string()) {
          r.texts[i] = c["delta"][keys[i]];
        }
      }
    }
    if (c.contains("finish_reason") && c["finish_reason"].is_string()) {
      r.finish_reason = c["finish_reason"];
    }
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const nlohmann::json& u = j["usage"];
    r.usage = true;
    r.prompt_tokens = IntOf(u, "prompt_tokens");
    r.completion_tokens = IntOf(u, "completion_tokens");
    if (u.contains("prompt_tokens_details")) {
      r.cached_tokens = IntOf(u["prompt_tokens_details"], "cached_tokens");
    }
  }
  if (j.contains("timings")) r.cache_n = IntOf(j["timings"], "cache_n");
  return r;
}

// Whenever the scan accepts `data`, nlohmann parses it to an object with the same fields.
void ExpectAgreement(const std::string& data) {
  ChunkScratch scratch;
  ChunkFacts f;
  if (!ScanChunk(data, &scratch, &f)) return;
  const nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "the scan accepted what nlohmann refuses: " << data;
  ASSERT_TRUE(j.is_object()) << data;
  const Reference want = Read(j);
  EXPECT_EQ(f.model, want.model) << data;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(f.texts[i], want.texts[i]) << data;
  }
  EXPECT_EQ(f.finish_reason.has_value(), want.finish_reason.has_value()) << data;
  if (f.finish_reason && want.finish_reason) {
    EXPECT_EQ(*f.finish_reason, *want.finish_reason) << data;
  }
  EXPECT_EQ(f.usage, want.usage) << data;
  EXPECT_EQ(f.prompt_tokens, want.prompt_tokens) << data;
  EXPECT_EQ(f.completion_tokens, want.completion_tokens) << data;
  EXPECT_EQ(f.cached_tokens, want.cached_tokens) << data;
  EXPECT_EQ(f.cache_n, want.cache_n) << data;
}

bool Scans(const std::string& data) {
  ChunkScratch scratch;
  ChunkFacts f;
  return ScanChunk(data, &scratch, &f);
}

TEST(ScanChunk, ReadsTheServersShapesInPlace) {
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_TRUE(Scans(Chunks()[i])) << "a plain chunk must not fall back: " << Chunks()[i];
    ExpectAgreement(Chunks()[i]);
  }
  ChunkScratch scratch;
  ChunkFacts f;
  ASSERT_TRUE(ScanChunk(Chunks()[6], &scratch, &f));
  EXPECT_EQ(f.texts[2], "say \"hi\"\\ / \b\f\n\r\t \xC3\xA9\xE6\xBC\xA2\xF0\x9F\x98\x80 é漢😀");
}

TEST(ScanChunk, GivesUpOnWhatTheGenericReadingMustWord) {
  for (size_t i = 16; i < Chunks().size(); ++i) {
    EXPECT_FALSE(Scans(Chunks()[i])) << Chunks()[i];
  }
}

// Mutations of the shapes: bytes replaced, dropped, inserted, a span repeated. The scan may give up
// on any of them; it must never accept one nlohmann refuses or read one differently.
TEST(ScanChunk, AgreesWithTheGenericParseOnMutatedChunks) {
  std::string alphabet = "\"\\{}[],:01-.eEnultrfu/ \t\n\x01\xC3\xA9\xED\xA0\xFF";
  alphabet.push_back('\0');
  std::mt19937 rng(20260330);
  int accepted = 0;
  for (int n = 0; n < 40000; ++n) {
    std::string s = Chunks()[rng() % Chunks().size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !s.empty(); ++e) testing::DamageOnce(&s, rng, alphabet, true);
    if (Scans(s)) ++accepted;
    ExpectAgreement(s);
    if (HasFailure()) return;
  }
  EXPECT_GT(accepted, 1000) << "mutations that stay plain chunks are read in place";
}

RequestResult DecodeOne(const std::string& data) {
  RawRecord r;
  r.id = "m0";
  r.actual_send_ns = r.intended_send_ns = 1'000'000'000;
  r.http_status = 200;
  r.content_type = "text/event-stream";
  r.events = {SseEvent{1'100'000'000, data, false},
              SseEvent{1'200'000'000, R"({"choices":[],"usage":{"completion_tokens":1}})", false},
              SseEvent{1'300'000'000, "[DONE]", false}};
  r.end_ns = 1'400'000'000;
  return DecodeRecord(r);
}

// The chunks the scan leaves to nlohmann come out as nlohmann reads them.
TEST(StreamDecoder, ChunksTheScanGivesUpOnAreReadGenerically) {
  EXPECT_EQ(DecodeOne(R"({"choices":[{"delta":{"content":"a","content":"b"}}]})").output_text, "b")
      << "nlohmann keeps the last of a repeated key";
  EXPECT_EQ(DecodeOne(R"({"error":null,"choices":[{"delta":{"content":"ok"}}]})").output_text,
            "ok");
  RequestResult two =
      DecodeOne(R"({"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]})");
  EXPECT_EQ(two.output_text, "ab");
  ASSERT_EQ(two.errors.size(), 1u);
  EXPECT_NE(two.errors[0].find("2 choices in one chunk"), std::string::npos) << two.errors[0];
  RequestResult surrogate = DecodeOne(R"({"choices":[{"delta":{"content":"\ud83d"}}]})");
  ASSERT_EQ(surrogate.errors.size(), 1u);
  EXPECT_NE(surrogate.errors[0].find("malformed JSON"), std::string::npos) << surrogate.errors[0];
  EXPECT_EQ(DecodeOne("\xEF\xBB\xBF{\"choices\":[{\"delta\":{\"content\":\"bom\"}}]}").output_text,
            "bom");
  EXPECT_EQ(DecodeOne(R"({"choices":[],"usage":{"prompt_tokens":2.9}})").prompt_tokens, 2)
      << "a count written as a float is read as its integer part";
  RequestResult error = DecodeOne(R"({"error":{"message":"boom"}})");
  ASSERT_EQ(error.errors.size(), 1u);
  EXPECT_NE(error.errors[0].find("error frame: boom"), std::string::npos) << error.errors[0];
}

// A text split into many chunks, a character per chunk, some of them escaped: the same text,
// digest and counts as the whole.
TEST(StreamDecoder, ATextCutIntoChunksComesBackWhole) {
  const std::vector<std::string> pieces = {"é",   "\\u6f22", "😀", "\\ud83d\\ude00",
                                           "\\n", "\\\"",    ""};
  std::string want;
  int64_t nonempty = 0;
  RawRecord r;
  r.id = "m0";
  r.actual_send_ns = r.intended_send_ns = 1'000'000'000;
  r.http_status = 200;
  r.content_type = "text/event-stream";
  MonoNs t = 1'100'000'000;
  for (int k = 0; k < 50; ++k) {
    const std::string& p = pieces[static_cast<size_t>(k) % pieces.size()];
    r.events.push_back(SseEvent{
        t += 1'000'000,
        R"({"model":"m","choices":[{"index":0,"delta":{"content":")" + p + R"("}}]})", false});
    want += nlohmann::json::parse("\"" + p + "\"").get<std::string>();
    if (!p.empty()) ++nonempty;
  }
  r.events.push_back(
      SseEvent{t += 1'000'000,
               R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":50}})", false});
  r.events.push_back(SseEvent{t += 1'000'000, "[DONE]", false});
  r.end_ns = t + 1'000'000;
  const RequestResult got = DecodeRecord(r);
  EXPECT_TRUE(got.errors.empty()) << got.errors[0];
  EXPECT_EQ(got.output_text, want);
  EXPECT_EQ(got.content_text, want);
  EXPECT_EQ(got.output_sha256, Sha256Hex(want));
  EXPECT_EQ(got.content_sha256, Sha256Hex(want));
  EXPECT_EQ(got.chunks, 51);
  EXPECT_EQ(got.nonempty_chunks, nonempty);
  EXPECT_EQ(got.output_utf8_bytes, static_cast<int64_t>(want.size()));
  EXPECT_EQ(got.models, std::vector<std::string>({"m", ""}));
}

}  // namespace
}  // namespace capq
