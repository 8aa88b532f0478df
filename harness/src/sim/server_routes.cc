// The simulated server's routes: a request's path to its endpoint, and the endpoints every
// dialect shares apart from chat (server_chat.cc): health, models, server_info, version, the cache
// flush, tokenize, metrics and capq's own /capq_sim. llama.cpp's own shapes are in
// server_llamacpp.cc.
#include <event2/http.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "capq/sim/tokenizer.h"
#include "server_impl.h"

namespace capq::sim {
namespace {

// SGLang's answer to /flush_cache, both when it flushed (200) and when it refused (400).
constexpr const char* kFlushText =
    "Cache flushed.\nPlease check backend logs for more details. (When there are running or "
    "waiting requests, the operation will not be performed.)\n";

}  // namespace

// The dialect's route for `path`: an exact path, or a slot action's prefix with more after it.
const Route* SimServer::Impl::FindRoute(const std::string& path) const {
  for (int i = 0; i < spec->route_count; ++i) {
    const Route& r = spec->routes[i];
    const bool prefix = r.endpoint == Endpoint::kSlotAction;
    if (prefix ? path.rfind(r.path, 0) == 0 && path.size() > std::strlen(r.path) : path == r.path) {
      return &r;
    }
  }
  return nullptr;
}

void SimServer::Impl::Handle(evhttp_request* req) {
  const char* uri_s = evhttp_request_get_uri(req);
  evhttp_uri* uri = evhttp_uri_parse(uri_s ? uri_s : "/");
  std::string path = uri && evhttp_uri_get_path(uri) ? evhttp_uri_get_path(uri) : "/";
  if (uri) evhttp_uri_free(uri);
  const evhttp_cmd_type method = evhttp_request_get_command(req);
  const bool get = method == EVHTTP_REQ_GET || method == EVHTTP_REQ_HEAD;
  const bool post = method == EVHTTP_REQ_POST;
  const Route* route = FindRoute(path);
  if (!route) {
    ReplyError(req, 404, "Not Found: " + path);
  } else if (!((get && route->get) || (post && route->post))) {
    ReplyError(req, 405, "Method Not Allowed");
  } else {
    Serve(route->endpoint, req, path);
  }
  Snapshot();
}

// Hands the request to its endpoint's handler.
void SimServer::Impl::Serve(Endpoint endpoint, evhttp_request* req, const std::string& path) {
  switch (endpoint) {
    case Endpoint::kChat:
      HandleChat(req);
      break;
    case Endpoint::kHealth:
      HandleHealth(req);
      break;
    case Endpoint::kModels:
      HandleModels(req);
      break;
    case Endpoint::kMetrics:
      HandleMetrics(req);
      break;
    case Endpoint::kTokenize:
      HandleTokenize(req);
      break;
    case Endpoint::kServerInfo:
      HandleServerInfo(req);
      break;
    case Endpoint::kFlush:
      HandleFlush(req);
      break;
    case Endpoint::kVersion:
      HandleVersion(req);
      break;
    case Endpoint::kProps:
      HandleProps(req);
      break;
    case Endpoint::kSlots:
      HandleSlots(req);
      break;
    case Endpoint::kSlotAction:
      HandleSlotAction(req, path);
      break;
    case Endpoint::kApplyTemplate:
      HandleApplyTemplate(req);
      break;
    case Endpoint::kCapqSim:
      HandleCapqSim(req);
      break;
  }
}

json SimServer::Impl::CapqSimInfo() const {
  return {{"profile", profile.name},
          {"identity_digest", digest},
          {"time_scale", scale},
          {"dialect", spec->name}};
}

void SimServer::Impl::HandleCapqSim(evhttp_request* req) {
  Reply(req, 200, CapqSimInfo().dump(), "application/json");
}

void SimServer::Impl::HandleHealth(evhttp_request* req) {
  const double uptime_s = static_cast<double>(VirtNow()) / 1e9;
  if (uptime_s < faults.health_503_for_s()) {
    Reply(req, 503, spec->health_loading_body,
          *spec->health_loading_body ? "application/json" : "text/plain");
    return;
  }
  Reply(req, 200, spec->health_ok_body, spec->health_content_type);
}

void SimServer::Impl::HandleModels(evhttp_request* req) {
  if (spec->dialect == Dialect::kLlamacpp) {
    HandleLlamacppModels(req);
    return;
  }
  json m = {{"id", profile.served_model_name},
            {"object", "model"},
            {"created", start_unix_ns / 1000000000},
            {"owned_by", spec->owned_by},
            {"root", profile.model_path},
            {"max_model_len", profile.context_length}};
  if (!spec->null_keys) m["parent"] = nullptr;
  json body = {{"object", "list"}, {"data", json::array({m})}};
  Reply(req, 200, body.dump(), "application/json");
}

void SimServer::Impl::HandleServerInfo(evhttp_request* req) {
  const bool spec_on = profile.spec_draft_tokens > 0;
  json info = {
      {"model_path", profile.model_path},
      {"tokenizer_path", profile.model_path},
      {"served_model_name", profile.served_model_name},
      {"max_total_num_tokens", profile.max_total_tokens},
      {"max_running_requests", profile.max_running_requests},
      // server_args.context_length is null unless --context-length was given: the context in
      // force is /v1/models max_model_len (recorded: sugar-crush Qwen3.8 /server_info).
      {"context_length", nullptr},
      {"max_req_input_len", profile.context_length - 1},
      {"stream_interval", profile.stream_interval},
      {"enable_cache_report", profile.cache_report},
      {"enable_metrics", profile.metrics},
      {"chunked_prefill_size", profile.chunked_prefill_size},
      {"max_prefill_tokens", profile.chunked_prefill_size},
      {"page_size", profile.page_size},
      {"schedule_policy", "fcfs"},
      {"disable_radix_cache", !profile.prefix_cache},
      {"enable_mixed_chunk", profile.mixed_chunks},
      {"speculative_algorithm", spec_on ? json("EAGLE") : json(nullptr)},
      {"speculative_num_steps", spec_on ? json(profile.spec_draft_tokens) : json(nullptr)},
      {"speculative_eagle_topk", spec_on ? json(1) : json(nullptr)},
      {"speculative_num_draft_tokens",
       spec_on ? json(profile.spec_draft_tokens + 1) : json(nullptr)},
      {"version", "capq-sim"},
      {"internal_states",
       json::array({{{"memory_usage", {{"token_capacity", profile.max_total_tokens}}},
                     {"effective_max_running_requests_per_dp", profile.max_running_requests}}})},
      {"capq_sim", CapqSimInfo()},
  };
  Reply(req, 200, info.dump(), "application/json");
}

void SimServer::Impl::HandleVersion(evhttp_request* req) {
  json v = {{"version", "capq-sim"}};
  Reply(req, 200, v.dump(), "application/json");
}

bool SimServer::Impl::DoFlush() {
  if (Busy()) return false;
  if (faults.lying_flush()) return true;  // says yes, keeps the cache
  if (!engine->FlushCache()) return false;
  EngineStats st = engine->stats();
  flush_base_prompt = st.prompt_tokens_total;
  flush_base_cached = st.cached_tokens_total;
  return true;
}

void SimServer::Impl::HandleFlush(evhttp_request* req) {
  switch (spec->flush) {
    case FlushStyle::kSglangFlushCache: {
      const bool ok = DoFlush();
      Reply(req, ok ? 200 : 400, kFlushText, "text/plain; charset=utf-8");
      return;
    }
    case FlushStyle::kVllmResetPrefix:
      // vLLM answers 200 even when the engine refused (it only logs the failure).
      (void)DoFlush();
      Reply(req, 200, "", nullptr);
      return;
    case FlushStyle::kLlamacppSlotErase:
      ReplyError(req, 404, "Not Found");
      return;
  }
}

// SGLang: exactly one of "prompt" and "messages" (protocol.py class TokenizeRequest, commit
// 004c82e0), answered {"tokens","count","max_model_len"}. vLLM: TokenizeCompletionRequest
// {"prompt","add_special_tokens"} or TokenizeChatRequest {"messages","add_generation_prompt"},
// answered {"count","max_model_len","tokens","token_strs"} (entrypoints/openai/protocol.py).
// A chat request gets the template, so two chats' common prefix is the template prefix.
void SimServer::Impl::HandleTokenize(evhttp_request* req) {
  json body;
  if (!ParseBody(req, &body)) return;
  if (spec->dialect == Dialect::kLlamacpp) {
    HandleLlamacppTokenize(req, body);
    return;
  }
  const bool has_prompt = body.contains("prompt") && !body["prompt"].is_null();
  const bool has_messages = body.contains("messages") && !body["messages"].is_null();
  if (has_prompt == has_messages) {
    ReplyError(req, 400, "Exactly one of 'prompt' or 'messages' must be provided.");
    return;
  }
  std::vector<uint32_t> ids;
  if (has_prompt) {
    if (!body["prompt"].is_string()) {
      ReplyError(req, 400, "'prompt' must be a string");
      return;
    }
    const json add = body.value("add_special_tokens", json(true));
    if (tmpl.bos && add.is_boolean() && add.get<bool>()) ids.push_back(BosTokenId());
    TokenizeWords(body["prompt"].get<std::string>(), &ids);
  } else {
    std::string text, error;
    std::vector<ChatMessage> messages;
    if (!MessagesText(body["messages"], &text, &error, &messages)) {
      ReplyError(req, 400, error);
      return;
    }
    ids = ApplyChatTemplate(messages, tmpl);
  }
  json out = {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", profile.context_length}};
  if (!spec->null_keys) out["token_strs"] = nullptr;
  Reply(req, 200, out.dump(), "application/json");
}

void SimServer::Impl::HandleMetrics(evhttp_request* req) {
  if (!profile.metrics) {
    // Launched without metrics (SGLang without --enable-metrics): no route.
    ReplyError(req, 404, "Not Found: /metrics");
    return;
  }
  if (spec->dialect == Dialect::kLlamacpp) {
    HandleLlamacppMetrics(req);
    return;
  }
  EngineStats st = engine->stats();
  char labels[256];
  std::snprintf(labels, sizeof(labels), spec->m_labels, profile.served_model_name.c_str());
  std::string out;
  auto sample = [&](const char* name, const char* type, double v) {
    if (!name) return;
    out += "# TYPE ";
    out += name;
    out += ' ';
    out += type;
    out += '\n';
    out += name;
    out += labels;
    char buf[64];
    std::snprintf(buf, sizeof(buf), " %.17g\n", v);
    out += buf;
  };
  sample(spec->m_running, "gauge", st.running);
  sample(spec->m_waiting, "gauge", st.waiting + delayed);
  if (spec->m_kv_usage) {
    sample(spec->m_kv_usage, "gauge",
           st.pool_total_tokens > 0 ? static_cast<double>(st.pool_used_tokens) /
                                          static_cast<double>(st.pool_total_tokens)
                                    : 0.0);
  }
  const int64_t prompt = st.prompt_tokens_total - flush_base_prompt;
  const int64_t cached = st.cached_tokens_total - flush_base_cached;
  sample(spec->m_cache_hit_rate, "gauge",
         prompt > 0 ? static_cast<double>(cached) / static_cast<double>(prompt) : 0.0);
  sample(spec->m_prefix_hits_total, "counter", static_cast<double>(st.cached_tokens_total));
  sample(spec->m_prefix_queries_total, "counter", static_cast<double>(st.prompt_tokens_total));
  sample(spec->m_prompt_tokens_total, "counter", static_cast<double>(st.prompt_tokens_total));
  sample(spec->m_generation_tokens_total, "counter",
         static_cast<double>(st.generated_tokens_total));
  if (spec->m_ttft) AppendTtftHistogram(labels, &out);
  if (spec->m_cache_config_info) AppendCacheConfigInfo(&out);
  Reply(req, 200, out, spec->metrics_content_type);
}

// The KV pool's shape as vLLM reports it: an info gauge of value 1 whose labels are the cache
// config, sorted, Python's booleans as True/False (tests/data/conformance/vllm/10-metrics.resp).
// The pool is max_total_tokens in blocks of page_size (vLLM's --block-size); the labels capq's
// vLLM adapter reads are the ones kept.
void SimServer::Impl::AppendCacheConfigInfo(std::string* out) const {
  const std::string name = spec->m_cache_config_info;
  const int block = std::max(1, profile.page_size);
  *out += "# HELP " + name + " Information of the LLMEngine CacheConfig\n# TYPE " + name +
          " gauge\n" + name + "{block_size=\"" + std::to_string(block) +
          "\",cache_dtype=\"auto\",enable_prefix_caching=\"" +
          (profile.prefix_cache ? "True" : "False") + "\",engine=\"0\",num_gpu_blocks=\"" +
          std::to_string(profile.max_total_tokens / block) + "\"} 1.0\n";
}

// The time-to-first-token histogram (virtual seconds), under the dialect's name and `labels`.
void SimServer::Impl::AppendTtftHistogram(const char* labels, std::string* out) const {
  const std::string name = spec->m_ttft;
  std::string lab = labels;  // "{...}" or ""
  std::string inner = lab.size() > 2 ? lab.substr(1, lab.size() - 2) + "," : "";
  *out += "# TYPE " + name + " histogram\n";
  int64_t cum = 0;
  char buf[128];
  for (size_t b = 0; b < kTtftBuckets; ++b) {
    cum += ttft_counts[b];
    std::snprintf(buf, sizeof(buf), "_bucket{%sle=\"%g\"} %lld\n", inner.c_str(), kTtftBucketsS[b],
                  static_cast<long long>(cum));
    *out += name + buf;
  }
  cum += ttft_counts[kTtftBuckets];
  std::snprintf(buf, sizeof(buf), "_bucket{%sle=\"+Inf\"} %lld\n", inner.c_str(),
                static_cast<long long>(cum));
  *out += name + buf;
  std::snprintf(buf, sizeof(buf), " %.17g\n", ttft_sum_s);
  *out += name + "_sum" + lab + buf;
  std::snprintf(buf, sizeof(buf), " %lld\n", static_cast<long long>(ttft_count));
  *out += name + "_count" + lab + buf;
}

}  // namespace capq::sim
