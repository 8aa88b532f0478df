// The benign ways real servers' streams differ, and which of them the simulated server sends.
//
// A healthy server is free to frame the same answer in several ways, and capq must accept every
// one of them: its gates rest on what the stream proves, never on one engine's habits. Each
// variation below is something a real server is known to send, with its source (a recording under
// tests/data/conformance/recorded/, a file:line of the server's code, or an issue):
//
//   tokens_per_chunk      several tokens per content delta: --stream-interval N sends the first
//                         token at once, then the tokens pending every N (vLLM
//                         v1/engine/output_processor.py:287-308; SGLang
//                         managers/scheduler_components/output_streamer.py:405-431), a
//                         speculative step's accepted tokens (recorded: SGLang Qwen3.8, 28 tokens
//                         in 10 deltas), and llama.cpp holding back an incomplete UTF-8 sequence
//                         or a partial stop string (tools/server/server-context.cpp:1871-1916)
//   merge_when_slow       a client that reads slowly gets whatever its stream has pending in one
//                         delta: vLLM's RequestOutputCollector.put aggregates a request's outputs
//                         the API server has not taken yet (v1/engine/output_processor.py:45-76),
//                         SGLang's _wait_one_response takes a request's whole queue of outputs
//                         (managers/tokenizer_manager.py:1713-1731)
//   cached_zero           what usage says of a request that hit nothing in the prefix cache:
//                         {"cached_tokens":0}, "prompt_tokens_details":null (SGLang with
//                         --enable-cache-report: only N > 0 is an object, usage_processor.py;
//                         recorded Qwen3.8 and Hunyuan) or no key at all (vLLM sends the details
//                         only with --enable-prompt-tokens-details and cached > 0)
//   last_text_on_finish   the last token's text rides on the chunk that carries finish_reason
//                         (vLLM entrypoints/openai/chat_completion/serving.py:889-907)
//   empty_finish_reason   "finish_reason":"" on every chunk before the last (SGLang 0.4, TGI;
//                         zed-industries/zed issue 24067)
//   empty_id              "id":"" on every chunk (OpenAI-compatible gateways)
//   role_every_delta      "role":"assistant" repeated in every delta (TGI, some gateways)
//   usage_key             "usage":null on some chunks and absent on others (recorded: SGLang
//                         DeepSeek-V4 parallel tool calls)
//   integer_stop          matched_stop / stop_reason an integer token id on a stop (recorded:
//                         SGLang Qwen3.8 and Hunyuan, vLLM Kimi completions)
//   keepalive_while_queued  SSE comments (": ping") before the first token: llama.cpp pings every
//                         --sse-ping-interval (server-context.cpp:4318-4332), proxies and other
//                         OpenAI-compatible frontends ping a quiet stream
//   role_at_admission     the role chunk as soon as the request is admitted, long before the first
//                         token (neither SGLang nor vLLM does: both send it with the first output;
//                         frontends that announce the stream early do)
//
// Server-wide variations (one per server, not per request) are the dialect's own: flush answers,
// error bodies and /server_info "context_length": null (dialect.h).
//
// Each dialect sends its own engine's variations (DialectVariation). In varied mode every request
// draws among all of them, seeded by the server's variation seed and the request's index, so a
// trial's draw is the same on every run.
#pragma once

#include <cstdint>
#include <string>

#include "capq/engine/profile.h"
#include "capq/sim/server.h"
#include "capq/status.h"

namespace capq::sim {

enum class VariationMode {
  kDialect,  // each request framed as the dialect's engine frames it
  kVaried,   // each request draws among every known benign variation
};

// "dialect" | "varied"
Result<VariationMode> ParseVariationMode(const std::string& name);

enum class CachedZero { kObject, kNull, kAbsent };
enum class UsageKey { kAbsent, kNull, kMixed };  // on chunks other than the usage chunk

struct StreamVariation {
  int tokens_per_chunk = 1;  // a content delta carries up to this many tokens (the first alone)
  bool merge_when_slow = false;
  CachedZero cached_zero = CachedZero::kObject;
  bool last_text_on_finish = false;
  bool empty_finish_reason = false;
  bool empty_id = false;
  bool role_every_delta = false;
  UsageKey usage_key = UsageKey::kAbsent;
  bool integer_stop = false;
  bool keepalive_while_queued = false;
  bool role_at_admission = false;

  bool operator==(const StreamVariation&) const = default;
};

// What the dialect's own engine sends, configured as the profile says (stream_interval,
// cache_report, prompt_tokens_details).
StreamVariation DialectVariation(Dialect dialect, const engine::EngineProfile& profile);

// Varied mode: request `index`'s draw, from `seed`. Every variation is drawn on its own, so over a
// trial's requests each one appears with and without the others.
StreamVariation DrawVariation(uint64_t seed, int64_t index);

}  // namespace capq::sim
