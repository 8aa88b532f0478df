// The sglang and vllm dialects held to what real SGLang and vLLM servers sent
// (tests/data/conformance/recorded/): chunk for chunk of the same kind, the same keys, value types
// and, where the recording kept the bytes (grade A), the same key order.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "conformance_util.h"
#include "server_test_util.h"

namespace capq::sim::testing {
namespace {

const std::string kRecorded = std::string(CAPQ_SOURCE_DIR) + "/tests/data/conformance/recorded/";

// The frames of a stream, by kind (conformance_util.h FrameKind): R role, C content, F finish,
// U usage; the recording's reasoning deltas are left out (the simulator streams no reasoning).
// A role the client filled in as null (the llama-stack recording) is no role.
char Kind(const std::string& frame) {
  const char k = FrameKind(frame);
  if (k != 'R') return k;
  return json::parse(frame)["choices"][0]["delta"]["role"].is_null() ? 'C' : 'R';
}

std::map<char, std::vector<std::string>> ByKind(const std::vector<std::string>& frames) {
  std::map<char, std::vector<std::string>> out;
  for (const std::string& f : frames) {
    const char k = Kind(f);
    if (k == 'C' && !json::parse(f)["choices"][0]["delta"]["content"].is_string()) continue;
    out[k].push_back(f);
  }
  return out;
}

// Every object's keys in order, depth first: "$[id,object,...] $.choices[0][index,delta,...]".
void KeyOrder(const nlohmann::ordered_json& j, const std::string& at, std::string* out) {
  if (j.is_object()) {
    *out += at + "[";
    for (auto it = j.begin(); it != j.end(); ++it) *out += it.key() + ",";
    *out += "] ";
    for (auto it = j.begin(); it != j.end(); ++it) KeyOrder(it.value(), at + "." + it.key(), out);
  } else if (j.is_array() && !j.empty()) {
    KeyOrder(j[0], at + "[0]", out);
  }
}

std::string KeyOrder(const std::string& frame) {
  std::string out;
  KeyOrder(nlohmann::ordered_json::parse(frame), "$", &out);
  return out;
}

// A stream from the dialect that stops on its own ("stop"), as the recorded ones did.
std::vector<std::string> StreamFrom(Dialect d) {
  auto server = StartServer(TinyProfileYaml(), 1000.0, d);
  EXPECT_TRUE(server);
  if (!server) return {};
  HttpResult r = Post(server->url() + "/v1/chat/completions",
                      ChatBody("a cold prompt of a few words", 64, true, /*ignore_eos=*/false));
  EXPECT_EQ(r.status, 200);
  return SseData(r.body);
}

// SGLang's msgspec chunks (recorded Qwen3.8, grade A: the bytes as captured): the role chunk,
// content deltas, the finish chunk with an integer matched_stop and the usage chunk whose
// prompt_tokens_details is null on a cold request, key for key and in the same order.
TEST(RecordedPeerShapes, SglangDialectMatchesTheRecordedQwenStream) {
  const std::vector<std::string> recorded =
      SseData(ReadFile(kRecorded + "sglang/sugarcrush-qwen3.8-chat-stream-usage-reasoning.sse"));
  auto want = ByKind(recorded);
  auto got = ByKind(StreamFrom(Dialect::kSglang));
  for (char kind : {'R', 'C', 'F', 'U'}) {
    SCOPED_TRACE(std::string("frame kind ") + kind);
    ASSERT_FALSE(want[kind].empty());
    ASSERT_FALSE(got[kind].empty());
    const std::string& w = want[kind].back();
    for (const std::string& g : got[kind]) {
      EXPECT_EQ(ShapeDiff(json::parse(w), json::parse(g)), std::vector<std::string>{}) << g;
      EXPECT_EQ(KeyOrder(g), KeyOrder(w)) << g;
    }
  }
}

// vLLM's chunks as the OpenAI client re-serialised them (llama-stack recording, grade B: every
// field of the client's model is there, null when the server left it out). Every key the dialect
// sends is one the recording has, of the same type where the recording has a value, and
// stop_reason is on the finish chunk only (vLLM serialises with exclude_unset).
void ExpectSubsetShape(const json& want, const json& got, const std::string& at) {
  if (want.is_null()) return;  // filled in by the client: the server may have left it out
  ASSERT_EQ(TypeClass(want), TypeClass(got)) << at;
  if (got.is_object()) {
    for (auto it = got.begin(); it != got.end(); ++it) {
      ASSERT_TRUE(want.contains(it.key())) << at << "." << it.key() << " is not in the recording";
      ExpectSubsetShape(want[it.key()], it.value(), at + "." + it.key());
    }
  } else if (got.is_array() && !got.empty() && !want.empty()) {
    ExpectSubsetShape(want[0], got[0], at + "[0]");
  }
}

TEST(RecordedPeerShapes, VllmDialectIsWithinTheRecordedLlamaStackStream) {
  const json rec =
      json::parse(ReadFile(kRecorded + "vllm/llamastack-chat-stream-toolcall-qwen3-0.6b.json"));
  std::vector<std::string> recorded;
  for (const json& c : rec["response"]["body"]) recorded.push_back(c["__data__"].dump());
  auto want = ByKind(recorded);
  const std::vector<std::string> frames = StreamFrom(Dialect::kVllm);
  auto got = ByKind(frames);
  for (char kind : {'R', 'C', 'F'}) {
    SCOPED_TRACE(std::string("frame kind ") + kind);
    ASSERT_FALSE(want[kind].empty());
    ASSERT_FALSE(got[kind].empty());
    for (const std::string& g : got[kind]) {
      ExpectSubsetShape(json::parse(want[kind].back()), json::parse(g), "$");
    }
  }
  for (const std::string& f : frames) {
    if (f == "[DONE]") continue;
    const json j = json::parse(f);
    if (j["choices"].empty()) continue;
    EXPECT_EQ(j["choices"][0].contains("stop_reason"), Kind(f) == 'F') << f;
  }
  // The last token's text rides on the finish chunk, as in vLLM's serving code.
  EXPECT_TRUE(json::parse(got['F'].back())["choices"][0]["delta"]["content"].is_string());
}

}  // namespace
}  // namespace capq::sim::testing
