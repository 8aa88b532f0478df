// The limits each engine's server reports about itself, under that engine's own names: what a
// row may pin in identity.server_expect (row-schema.md). A key an engine cannot report is refused
// at load, because an identity check that can never compare it would fail every trial; a key that
// is written is always compared (targets/ reads each one where `source` says).
//
// Sources (server-apis.md sections 3 and 7; ../shared/conformance/llamacpp/ 03, 04):
//   sglang:   GET /server_info (older builds /get_server_info); the running limit is the
//             allocator's effective one, internal_states[0].effective_max_running_requests_per_dp
//             x dp_size, not the requested server_args value.
//   vllm:     GET /v1/models data[0].max_model_len; the `vllm:cache_config_info` gauge's labels in
//             GET /metrics (block_size, num_gpu_blocks, enable_prefix_caching).
//   llamacpp: GET /props total_slots and default_generation_settings.n_ctx (the context of ONE
//             slot: -c divided by -np); GET /v1/models data[0].meta; /props build_info.
#pragma once

#include <string>
#include <vector>

#include "capq/model/row.h"

namespace capq {

enum class LimitType {
  kCount,        // integer >= 1
  kCountOrZero,  // integer >= 0 (speculative settings: 0 = off)
  kText,         // a string (an algorithm name, a build id)
  kFlag,         // true | false
};

struct LimitSpec {
  const char* key;
  LimitType type;
  bool required;       // a real-engine row must pin it: it decides how much work is admitted
  const char* source;  // where the server reports it, in words
};

// The keys engine `e` reports. For Engine::kSim this is empty: a sim row pins the keys of the
// dialect its simulator speaks (LimitsEngine()).
const std::vector<LimitSpec>& ReportableLimits(Engine e);

// The engine whose limit names a row uses: its own, or for a sim row the dialect's engine.
Engine LimitsEngine(const Identity& id);

// "total_slots, n_ctx, n_ctx_train, ..." for error messages.
std::string LimitKeysText(Engine e);

}  // namespace capq
