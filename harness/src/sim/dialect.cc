#include "capq/sim/dialect.h"

#include <cstring>

namespace capq::sim {
namespace {

constexpr Route kSglangRoutes[] = {
    {"/v1/chat/completions", Endpoint::kChat, false, true},
    {"/health", Endpoint::kHealth, true, false},
    {"/v1/models", Endpoint::kModels, true, false},
    {"/metrics", Endpoint::kMetrics, true, false},
    {"/tokenize", Endpoint::kTokenize, false, true},
    {"/v1/tokenize", Endpoint::kTokenize, false, true},
    {"/server_info", Endpoint::kServerInfo, true, false},
    {"/get_server_info", Endpoint::kServerInfo, true, false},
    {"/model_info", Endpoint::kServerInfo, true, false},
    {"/get_model_info", Endpoint::kServerInfo, true, false},
    {"/flush_cache", Endpoint::kFlush, true, true},
    {"/capq/sim", Endpoint::kCapqSim, true, false},
};
constexpr Route kVllmRoutes[] = {
    {"/v1/chat/completions", Endpoint::kChat, false, true},
    {"/health", Endpoint::kHealth, true, false},
    {"/v1/models", Endpoint::kModels, true, false},
    {"/metrics", Endpoint::kMetrics, true, false},
    {"/tokenize", Endpoint::kTokenize, false, true},
    {"/version", Endpoint::kVersion, true, false},
    {"/reset_prefix_cache", Endpoint::kFlush, false, true},
    {"/capq/sim", Endpoint::kCapqSim, true, false},
};
constexpr Route kLlamacppRoutes[] = {
    {"/v1/chat/completions", Endpoint::kChat, false, true},
    {"/health", Endpoint::kHealth, true, false},
    {"/v1/health", Endpoint::kHealth, true, false},
    {"/v1/models", Endpoint::kModels, true, false},
    {"/models", Endpoint::kModels, true, false},
    {"/metrics", Endpoint::kMetrics, true, false},
    {"/tokenize", Endpoint::kTokenize, false, true},
    {"/props", Endpoint::kProps, true, false},
    {"/slots", Endpoint::kSlots, true, false},
    {"/slots/", Endpoint::kSlotAction, false, true},
    {"/apply-template", Endpoint::kApplyTemplate, false, true},
    {"/capq/sim", Endpoint::kCapqSim, true, false},
};
constexpr Header kNoHeaders[] = {{nullptr, nullptr}};
constexpr Header kSseHeaders[] = {{"Cache-Control", "no-cache"}};
// Recorded on llama.cpp b9749 (conformance/llamacpp/ 03-18): the CORS header is there with an
// empty value because the recorder sent no Origin (ts/server-http.cpp:280-282); httplib adds
// Keep-Alive to every answer it keeps the connection open for.
constexpr Header kLlamacppHeaders[] = {
    {"Server", "llama.cpp"},
    {"Access-Control-Allow-Origin", ""},
};
constexpr Header kLlamacppSseHeaders[] = {{"X-Accel-Buffering", "no"}};
template <typename T, size_t N>
constexpr int Count(const T (&)[N]) {
  return static_cast<int>(N);
}

// Sources: server-apis.md sections 1, 2, 4, 5, 6 (read from each server's code, late 2026).
constexpr DialectSpec kSpecs[] = {
    {
        Dialect::kSglang,
        "sglang",
        "sglang",
        kSglangRoutes,
        Count(kSglangRoutes),
        /*health_ok_body=*/"",
        "text/plain",
        /*health_loading_body=*/"",
        FlushStyle::kSglangFlushCache,
        ErrorStyle::kSglang,
        /*null_keys=*/true,
        /*logprobs_key=*/true,
        /*reasoning_key=*/"reasoning_content",
        /*role_content_null=*/false,
        /*llamacpp_stream=*/false,
        /*usage_default_with_stream_options=*/false,
        /*usage_timings=*/false,
        /*stop_key=*/"matched_stop",
        /*stop_key_every_chunk=*/true,
        /*invalid_json_status=*/400,
        /*cap_max_tokens_to_context=*/false,
        kNoHeaders,
        0,
        kSseHeaders,
        Count(kSseHeaders),
        "application/json",
        "text/event-stream; charset=utf-8",
        "text/plain; version=0.0.4; charset=utf-8",
        /*close_on_error=*/false,
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:token_usage",
        "sglang:cache_hit_rate",
        // Cached prompt tokens, a counter (SGLang's production metrics docs; labelled by
        // cache_source there): what verify_cold reads when no stream reports a count.
        "sglang:cached_tokens_total",
        nullptr,
        "sglang:time_to_first_token_seconds",
        "sglang:prompt_tokens_total",
        "sglang:generation_tokens_total",
        "{model_name=\"%s\"}",
        /*m_cache_config_info=*/nullptr,
    },
    {
        Dialect::kVllm,
        "vllm",
        "vllm",
        kVllmRoutes,
        Count(kVllmRoutes),
        /*health_ok_body=*/"",
        "text/plain",
        /*health_loading_body=*/"",
        FlushStyle::kVllmResetPrefix,
        ErrorStyle::kVllm,
        /*null_keys=*/false,
        /*logprobs_key=*/true,
        /*reasoning_key=*/nullptr,
        /*role_content_null=*/false,
        /*llamacpp_stream=*/false,
        /*usage_default_with_stream_options=*/true,
        /*usage_timings=*/false,
        /*stop_key=*/"stop_reason",
        /*stop_key_every_chunk=*/false,
        /*invalid_json_status=*/400,
        /*cap_max_tokens_to_context=*/false,
        kNoHeaders,
        0,
        kSseHeaders,
        Count(kSseHeaders),
        "application/json",
        "text/event-stream; charset=utf-8",
        "text/plain; version=0.0.4; charset=utf-8",
        /*close_on_error=*/false,
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        nullptr,
        "vllm:prefix_cache_hits_total",
        "vllm:prefix_cache_queries_total",
        "vllm:time_to_first_token_seconds",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "{model_name=\"%s\",engine=\"0\"}",
        // tests/data/conformance/vllm/10-metrics.resp; vllm/v1/metrics/loggers.py,
        // log_metrics_info("cache_config", ...).
        "vllm:cache_config_info",
    },
    {
        Dialect::kLlamacpp,
        "llamacpp",
        "llamacpp",
        kLlamacppRoutes,
        Count(kLlamacppRoutes),
        /*health_ok_body=*/"{\"status\":\"ok\"}",
        "application/json",
        /*health_loading_body=*/
        "{\"error\":{\"code\":503,\"message\":\"Loading model\",\"type\":\"unavailable_error\"}}",
        FlushStyle::kLlamacppSlotErase,
        ErrorStyle::kLlamacpp,
        /*null_keys=*/false,
        /*logprobs_key=*/false,
        /*reasoning_key=*/nullptr,
        /*role_content_null=*/true,
        /*llamacpp_stream=*/true,
        /*usage_default_with_stream_options=*/false,
        /*usage_timings=*/true,
        /*stop_key=*/nullptr,
        /*stop_key_every_chunk=*/false,
        /*invalid_json_status=*/500,
        /*cap_max_tokens_to_context=*/true,
        kLlamacppHeaders,
        Count(kLlamacppHeaders),
        kLlamacppSseHeaders,
        Count(kLlamacppSseHeaders),
        "application/json; charset=utf-8",
        "text/event-stream",
        "text/plain; version=0.0.4",
        /*close_on_error=*/true,
        "llamacpp:requests_processing",
        "llamacpp:requests_deferred",
        nullptr,
        nullptr,
        nullptr,
        nullptr,
        nullptr,
        "llamacpp:prompt_tokens_total",
        "llamacpp:tokens_predicted_total",
        "",
        /*m_cache_config_info=*/nullptr,
    },
};

}  // namespace

const DialectSpec& SpecFor(Dialect d) {
  for (const auto& s : kSpecs) {
    if (s.dialect == d) return s;
  }
  return kSpecs[0];
}

Result<Dialect> ParseDialect(const std::string& name) {
  for (const auto& s : kSpecs) {
    if (name == s.name) return s.dialect;
  }
  return Status::InvalidArgument("unknown dialect '" + name +
                                 "' (expected sglang, vllm or llamacpp)");
}

const char* DialectName(Dialect d) { return SpecFor(d).name; }

Dialect DialectFor(capq::Engine engine) {
  switch (engine) {
    case capq::Engine::kVllm:
      return Dialect::kVllm;
    case capq::Engine::kLlamacpp:
      return Dialect::kLlamacpp;
    default:
      return Dialect::kSglang;
  }
}

const char* ReferenceProfile(Dialect d) {
  return d == Dialect::kLlamacpp ? "rows/sim/profiles/llamacpp_tiny.yaml"
                                 : "rows/sim/profiles/small.yaml";
}

ServerOptions ServerOptionsForRow(const Row& row) {
  ServerOptions o;
  o.profile_path = row.identity.sim_profile;
  o.time_scale = row.identity.time_scale;
  o.dialect = DialectFor(row.identity.sim_dialect);
  o.varied = row.identity.sim_varied;
  o.variation_seed = row.trials.seeds.empty() ? 1 : row.trials.seeds.front();
  return o;
}

}  // namespace capq::sim
