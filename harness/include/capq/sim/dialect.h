// Every difference between the simulated server's dialects, in one table (server-apis.md): endpoint
// names, health and flush answers, chunk shapes, error bodies, metric names. The server has one
// handler per endpoint role and reads this table; nothing else in it branches on the dialect.
#pragma once

#include <string>

#include "capq/sim/server.h"

namespace capq::sim {

enum class FlushStyle {
  kSglangFlushCache,   // GET|POST /flush_cache: 200 text when idle, 400 same text when busy
  kVllmResetPrefix,    // POST /reset_prefix_cache: always 200 empty, even when busy (nothing reset)
  kLlamacppSlotErase,  // POST /slots/{id}?action=erase: 200 {"id_slot","n_erased"}; deferred if
                       // busy
};

enum class ErrorStyle {
  kSglang,    // {"object":"error","message","type","param":null,"code"}
  kVllm,      // {"error":{"message","type","param":null,"code"}}
  kLlamacpp,  // {"error":{"code","message","type"}}
};

// What an endpoint does; the server has one handler per role.
enum class Endpoint {
  kChat,
  kHealth,
  kModels,
  kMetrics,
  kTokenize,
  kServerInfo,
  kFlush,
  kVersion,
  kProps,
  kSlots,
  kSlotAction,     // path prefix "/slots/": POST /slots/{id}?action=erase
  kApplyTemplate,  // llama.cpp POST /apply-template
  kCapqSim,  // GET /capq/sim in every dialect: the simulator's identity, no real server has it
};

struct Header {
  const char* name;
  const char* value;
};

struct Route {
  const char* path;  // exact path, or a prefix ending in '/' for kSlotAction
  Endpoint endpoint;
  bool get;   // GET (and HEAD) allowed
  bool post;  // POST allowed
};

struct DialectSpec {
  Dialect dialect;
  const char* name;
  const char* owned_by;  // /v1/models data[].owned_by
  const Route* routes;   // every path this dialect serves; anything else is 404
  int route_count;
  // Health: body and content type of the 200 answer.
  const char* health_ok_body;
  const char* health_content_type;
  const char* health_loading_body;  // body of the 503 answer (health_503_for_s fault)
  FlushStyle flush;
  ErrorStyle errors;
  // Chunk shapes.
  bool null_keys;     // SGLang writes unset fields as null; vLLM/llama.cpp leave them out
  bool logprobs_key;  // choices[] carry "logprobs":null (SGLang, vLLM; not llama.cpp)
  // The delta key for reasoning text, written as null first in every delta (SGLang's msgspec
  // chunks since 2026-04, recorded Qwen3.8 stream); nullptr: none.
  const char* reasoning_key;
  bool role_content_null;  // first chunk delta {"role":"assistant","content":null} (llama.cpp)
  // llama.cpp: status and headers go out when a slot starts the request (before prefill), the role
  // chunk shares an HTTP chunk with the first content delta, and the finish chunk with the usage
  // chunk; chunks put "choices" first and a choice "finish_reason" first; "system_fingerprint".
  bool llamacpp_stream;
  bool usage_default_with_stream_options;  // vLLM: include_usage defaults true with stream_options
  bool usage_timings;                      // llama.cpp: "timings" beside "usage" in the usage chunk
  // The choice key naming what stopped the output: SGLang's matched_stop on every chunk, vLLM's
  // stop_reason on the finish chunk only (serialised with exclude_unset; recorded llama-stack
  // stream); nullptr: none (llama.cpp).
  const char* stop_key;
  bool stop_key_every_chunk;
  // Requests.
  int invalid_json_status;         // llama.cpp answers a body that is not JSON with 500, others 400
  bool cap_max_tokens_to_context;  // llama.cpp silently caps max_tokens; others answer 400
  // Headers: on every answer, on an event stream, and the content types.
  const Header* headers;
  int header_count;
  const Header* sse_headers;
  int sse_header_count;
  const char* json_content_type;
  const char* sse_content_type;
  const char* metrics_content_type;
  bool close_on_error;  // every status >= 400 carries Connection: close (llama.cpp's httplib)
  // Metrics: Prometheus names.
  const char* m_running;
  const char* m_waiting;
  const char* m_kv_usage;           // nullptr: not exported
  const char* m_cache_hit_rate;     // gauge (nullptr: not exported)
  const char* m_prefix_hits_total;  // counter (nullptr: not exported)
  const char* m_prefix_queries_total;
  const char* m_ttft;  // histogram (nullptr: not exported)
  const char* m_prompt_tokens_total;
  const char* m_generation_tokens_total;
  const char* m_labels;  // label set for every sample, e.g. {model_name="..."} (%s = model)
  // An info gauge whose labels describe the KV pool (vLLM's vllm:cache_config_info); nullptr: not
  // exported.
  const char* m_cache_config_info;
};

const DialectSpec& SpecFor(Dialect d);

}  // namespace capq::sim
