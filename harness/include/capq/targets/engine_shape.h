// What each engine's reported limits mean in the engine model's terms (capq/engine/calibrate.h):
// the running limit, token pool, chunk size, scheduling policy, cache model and speculative steps
// of a real server, from the limits its adapter read (ServerFacts::values, the "limits" of a
// trial's server_info.json) or a row's identity.server_expect. A value the engine does not report
// is its documented default and marked assumed.
//
// Sources (server-apis.md sections 3, 4 and 7; engine_limits.h):
//   sglang:   max_running_requests is the allocator's effective limit; chunked_prefill_size the
//             per-step prefill budget; prefill first (get_next_batch_to_run), mixed chunks off by
//             default; speculative_num_steps draft tokens per verify step (EAGLE chain).
//   vllm:     max_model_len, num_gpu_blocks x block_size; the scheduler fills each step's token
//             budget with running decode rows first, then prefill (chunked prefill). max_num_seqs
//             and max_num_batched_tokens are not reported: their defaults are assumed.
//   llamacpp: total_slots slots of n_ctx tokens each (-np, -c / -np); every llama_decode() call
//             carries all decode rows and fills the rest of n_batch with prompt tokens
//             (tools/server/server-context.cpp update_slots); n_batch is not reported.
#pragma once

#include <map>
#include <string>

#include "capq/engine/calibrate.h"
#include "capq/model/row.h"
#include "capq/status.h"

namespace capq {

// `engine` is a real engine (for a sim row pass LimitsEngine(identity)); `limits` its reported
// values under its own names. InvalidArgument naming the key when a limit the model needs (the
// running limit) is missing or not a number.
Result<engine::ServerShape> ShapeFromLimits(Engine engine,
                                            const std::map<std::string, std::string>& limits);

}  // namespace capq
