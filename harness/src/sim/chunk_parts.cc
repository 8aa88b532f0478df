// The constant pieces of a stream's chunks, from its dialect and its variation (variations.h):
// every chunk is the stream's head, one of these choices with its text, the tail and a close.
#include <string>

#include "server_impl.h"

namespace capq::sim {
namespace {

// The token id a stop names in matched_stop / stop_reason when the variation writes it as an
// integer (the recorded servers name their EOS id there).
constexpr const char* kStopTokenId = "2";

std::string FinishValue(FinishKind k, const StreamVariation& v) {
  switch (k) {
    case FinishKind::kLength:
      return "\"length\"";
    case FinishKind::kStop:
      return "\"stop\"";
    case FinishKind::kNone:
      break;
  }
  return v.empty_finish_reason ? "\"\"" : "null";
}

// What follows the delta in a choice: logprobs, finish_reason and the stop key, then the '}'.
std::string ChoiceTail(const DialectSpec& spec, const StreamVariation& v, FinishKind k) {
  std::string t;
  if (spec.logprobs_key) t += ",\"logprobs\":null";
  t += ",\"finish_reason\":" + FinishValue(k, v);
  if (spec.stop_key && (spec.stop_key_every_chunk || k != FinishKind::kNone)) {
    t += ",\"" + std::string(spec.stop_key) + "\":";
    t += k == FinishKind::kStop && v.integer_stop ? kStopTokenId : "null";
  }
  return t + '}';
}

// llama.cpp puts finish_reason first in a choice (ts/server-task.cpp:1160-1166, :393-400).
void BuildLlamacppParts(const StreamVariation& v, ChunkParts* p) {
  const std::string role = v.role_every_delta ? "\"role\":\"assistant\"," : "";
  p->role_choice = "{\"finish_reason\":" + FinishValue(FinishKind::kNone, v) +
                   ",\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}";
  const auto open = [&](FinishKind k, const char* index) {
    return "{\"finish_reason\":" + FinishValue(k, v) + ",\"index\":" + index + ",\"delta\":{";
  };
  for (FinishKind k : {FinishKind::kNone, FinishKind::kLength, FinishKind::kStop}) {
    const int i = static_cast<int>(k);
    p->content_open[i] = open(k, "0") + role + "\"content\":\"";
    p->content_close[i] = "\"}}";
    p->finish_choice[i] = open(k, "0") + "}}";
  }
  p->content_open_index1 = open(FinishKind::kNone, "1") + role + "\"content\":\"";
}

void BuildOpenAiParts(const DialectSpec& spec, const StreamVariation& v, ChunkParts* p) {
  // SGLang: {"reasoning_content":null,"role":"assistant","content":""} (recorded Qwen3.8).
  const std::string reasoning =
      spec.reasoning_key ? "\"" + std::string(spec.reasoning_key) + "\":null" : "";
  const std::string lead = reasoning.empty() ? "" : reasoning + ",";
  const std::string role = v.role_every_delta ? "\"role\":\"assistant\"," : "";
  p->role_choice = "{\"index\":0,\"delta\":{" + lead + "\"role\":\"assistant\",\"content\":" +
                   (spec.role_content_null ? "null" : "\"\"") + "}" +
                   ChoiceTail(spec, v, FinishKind::kNone);
  const std::string content = lead + role + "\"content\":\"";
  for (FinishKind k : {FinishKind::kNone, FinishKind::kLength, FinishKind::kStop}) {
    const int i = static_cast<int>(k);
    p->content_open[i] = "{\"index\":0,\"delta\":{" + content;
    p->content_close[i] = "\"}" + ChoiceTail(spec, v, k);
    p->finish_choice[i] = "{\"index\":0,\"delta\":{" + reasoning + "}" + ChoiceTail(spec, v, k);
  }
  p->content_open_index1 = "{\"index\":1,\"delta\":{" + content;
}

}  // namespace

ChunkParts BuildChunkParts(const DialectSpec& spec, const StreamVariation& v) {
  ChunkParts p;
  if (spec.llamacpp_stream) {
    BuildLlamacppParts(v, &p);
  } else {
    BuildOpenAiParts(spec, v, &p);
  }
  const char* with_null = ",\"usage\":null}";
  switch (v.usage_key) {
    case UsageKey::kNull:
      p.chunk_close[0] = p.chunk_close[1] = with_null;
      break;
    case UsageKey::kAbsent:
      p.chunk_close[0] = p.chunk_close[1] = "}";
      break;
    case UsageKey::kMixed:
      p.chunk_close[0] = with_null;
      p.chunk_close[1] = "}";
      break;
  }
  return p;
}

}  // namespace capq::sim
