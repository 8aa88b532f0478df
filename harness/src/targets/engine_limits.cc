#include "capq/targets/engine_limits.h"

namespace capq {
namespace {

const std::vector<LimitSpec> kSglang = {
    {"max_total_num_tokens", LimitType::kCount, true,
     "/server_info max_total_num_tokens (else internal_states[0].memory_usage.token_capacity)"},
    {"max_running_requests", LimitType::kCount, true,
     "/server_info internal_states[0].effective_max_running_requests_per_dp x dp_size (the "
     "allocator's effective limit; server_args holds the requested one)"},
    {"context_length", LimitType::kCount, true, "/server_info context_length"},
    {"chunked_prefill_size", LimitType::kCount, false, "/server_info chunked_prefill_size"},
    {"max_prefill_tokens", LimitType::kCount, false, "/server_info max_prefill_tokens"},
    {"page_size", LimitType::kCount, false, "/server_info page_size"},
    {"tp_size", LimitType::kCount, false, "/server_info tp_size"},
    {"dp_size", LimitType::kCount, false, "/server_info dp_size"},
    {"schedule_policy", LimitType::kText, false, "/server_info schedule_policy"},
    {"disable_radix_cache", LimitType::kFlag, false, "/server_info disable_radix_cache"},
    {"speculative_algorithm", LimitType::kText, false, "/server_info speculative_algorithm"},
    {"speculative_num_steps", LimitType::kCountOrZero, false, "/server_info speculative_num_steps"},
    {"speculative_eagle_topk", LimitType::kCountOrZero, false,
     "/server_info speculative_eagle_topk"},
    {"speculative_num_draft_tokens", LimitType::kCountOrZero, false,
     "/server_info speculative_num_draft_tokens"},
    {"stream_interval", LimitType::kCount, false, "/server_info stream_interval"},
    {"enable_cache_report", LimitType::kFlag, false,
     "/server_info enable_cache_report (--enable-cache-report: per-request cached_tokens)"},
    {"enable_metrics", LimitType::kFlag, false, "/server_info enable_metrics (--enable-metrics)"},
};

const std::vector<LimitSpec> kVllm = {
    {"max_model_len", LimitType::kCount, true, "/v1/models data[0].max_model_len"},
    {"num_gpu_blocks", LimitType::kCount, true,
     "/metrics vllm:cache_config_info{num_gpu_blocks=...} (the KV pool the allocator made)"},
    {"block_size", LimitType::kCount, true, "/metrics vllm:cache_config_info{block_size=...}"},
    {"enable_prefix_caching", LimitType::kFlag, false,
     "/metrics vllm:cache_config_info{enable_prefix_caching=...}"},
    {"cache_dtype", LimitType::kText, false, "/metrics vllm:cache_config_info{cache_dtype=...}"},
    {"version", LimitType::kText, false, "/version version"},
};

const std::vector<LimitSpec> kLlamacpp = {
    {"total_slots", LimitType::kCount, true,
     "/props total_slots (-np: requests beyond it queue as llamacpp:requests_deferred)"},
    {"n_ctx", LimitType::kCount, true,
     "/props default_generation_settings.n_ctx (one slot's context: -c / -np)"},
    {"n_ctx_train", LimitType::kCount, false, "/v1/models data[0].meta.n_ctx_train"},
    {"n_vocab", LimitType::kCount, false, "/v1/models data[0].meta.n_vocab"},
    {"n_params", LimitType::kCount, false, "/v1/models data[0].meta.n_params"},
    {"build_info", LimitType::kText, false, "/props build_info (b<build>-<commit>)"},
};

const std::vector<LimitSpec> kNone;

}  // namespace

const std::vector<LimitSpec>& ReportableLimits(Engine e) {
  switch (e) {
    case Engine::kSglang:
      return kSglang;
    case Engine::kVllm:
      return kVllm;
    case Engine::kLlamacpp:
      return kLlamacpp;
    case Engine::kSim:
    case Engine::kOpenai:  // reports nothing beyond /v1/models
      break;
  }
  return kNone;
}

Engine LimitsEngine(const Identity& id) {
  return id.engine == Engine::kSim ? id.sim_dialect : id.engine;
}

std::string LimitKeysText(Engine e) {
  std::string out;
  for (const LimitSpec& s : ReportableLimits(e))
    out += (out.empty() ? "" : ", ") + std::string(s.key);
  return out;
}

}  // namespace capq
