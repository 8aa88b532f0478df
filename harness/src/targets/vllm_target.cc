// vLLM's adapter (target.h). Facts are from server-apis.md, vLLM's sources where cited and the
// recorded exchanges in tests/data/conformance/; each quirk is commented where it is handled.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "adapter_common.h"

namespace capq::internal {
namespace {

using adapter::Cancelled;
using adapter::ChatTokenizeIds;
using adapter::FirstModelField;
using adapter::IdsFrom;
using adapter::Metric;
using adapter::Nap;
using adapter::ScalarText;
using adapter::TakeModels;
using adapter::TextTokenizeRequest;
using adapter::TokenCountFrom;

// Newer vLLM answers {"success": false} when the reset could not run (blocks still held by
// requests); older builds an empty 200 whatever happened (serve/cache/api_router.py).
bool ResetRefused(const std::string& body) {
  if (body.empty()) return false;
  try {
    auto j = nlohmann::json::parse(body);
    return j.is_object() && j.contains("success") && j["success"] == false;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

class VllmTarget : public Target {
 public:
  explicit VllmTarget(TargetOptions o) : Target(std::move(o)) {}
  Engine engine() const override { return Engine::kVllm; }

  Result<ServerFacts> Facts() override {
    ServerFacts f;
    Result<nlohmann::json> models = GetJson("/v1/models");
    if (!models.ok()) return models.status();
    f.documents["/v1/models"] = *models;
    TakeModels(*models, &f);
    const nlohmann::json& len = FirstModelField(*models, "max_model_len");
    if (len.is_number()) f.values["max_model_len"] = ScalarText(len);
    if (Result<nlohmann::json> v = GetJson("/version"); v.ok()) {
      f.documents["/version"] = *v;
      if (v->contains("version")) f.values["version"] = f.version = ScalarText((*v)["version"]);
    }
    // The KV pool the allocator made is only in the cache-config info gauge's labels
    // (vllm/v1/metrics/loggers.py, log_metrics_info("cache_config", ...)); Python writes its
    // booleans as True/False.
    if (Result<std::string> m = Metrics(); m.ok()) {
      std::map<std::string, std::string> labels = PrometheusLabels(*m, "vllm:cache_config_info");
      f.documents["/metrics vllm:cache_config_info"] = labels;
      for (const char* k :
           {"num_gpu_blocks", "block_size", "enable_prefix_caching", "cache_dtype"}) {
        auto it = labels.find(k);
        if (it == labels.end() || it->second.empty() || it->second == "None") continue;
        std::string v = it->second;
        if (v == "True" || v == "False") v = v == "True" ? "true" : "false";
        f.values[k] = v;
      }
    }
    return f;
  }

  Result<FlushResult> Flush(MonoNs deadline_ns, const std::atomic<bool>* cancel) override {
    FlushResult fr;
    fr.method = "POST /reset_prefix_cache";
    while (true) {
      if (Cancelled(cancel)) return Status::Cancelled("interrupted while flushing");
      ++fr.attempts;
      Result<HttpResponse> r = client().Post(base_url() + "/reset_prefix_cache", "", "text/plain");
      if (!r.ok()) return r.status().WithContext("flush");
      if (r->status == 404) {
        return Status::FailedPrecondition(
            "flush failed: vLLM has no /reset_prefix_cache (start it with VLLM_SERVER_DEV_MODE=1)");
      }
      if (r->status != 200) {
        return Status::FailedPrecondition("flush failed: POST /reset_prefix_cache returned HTTP " +
                                          std::to_string(r->status));
      }
      if (!ResetRefused(r->body)) break;
      if (NowNs() >= deadline_ns) {
        return Status::FailedPrecondition(
            "flush failed: vLLM answered POST /reset_prefix_cache with {\"success\": false} "
            "until the deadline, " +
            std::to_string(fr.attempts) + " attempts");
      }
      Nap(200, cancel);
    }
    // An empty 200 is no proof (older vLLM only logs a failed reset): coldness is proven on the
    // measured requests by verify-cold, never by this status.
    fr.status_proves_nothing = true;
    fr.note = "requested; vLLM's 200 proves nothing, verify-cold decides";
    return fr;
  }

  Result<int64_t> CountTokens(const std::string& text) override {
    return TokenCountFrom(
        client().Post(base_url() + "/tokenize", TextTokenizeRequest(text).dump()));
  }

  Result<std::vector<int64_t>> TokenIds(const std::string& text) override {
    return IdsFrom(client().Post(base_url() + "/tokenize", TextTokenizeRequest(text).dump()));
  }

  // vLLM writes prompt_tokens_details only with --enable-prompt-tokens-details and only when a
  // prefix hit cached tokens (entrypoints/openai/serving_chat.py); the flag is reported nowhere,
  // so a stream that reported a count shows it on, and then a silent stream hit nothing.
  CacheCounterRule CacheCounter(const ServerFacts&) const override {
    CacheCounterRule rule;
    rule.absent_means_zero = true;
    rule.only_if_any_reported = true;
    rule.source =
        "vLLM with --enable-prompt-tokens-details writes prompt_tokens_details only when tokens "
        "were cached (serving_chat.py): once a stream of the trial reported one, a silent stream "
        "hit nothing";
    rule.launch_hint =
        "start vLLM with --enable-prompt-tokens-details (per-request cached_tokens); its /metrics "
        "prefix-cache counter stands in otherwise";
    return rule;
  }

  ServerLoad ParseLoad(const std::string& text) const override {
    auto m = ParsePrometheus(text);
    return {Metric(m, "vllm:num_requests_running"), Metric(m, "vllm:num_requests_waiting")};
  }
  std::optional<double> ParseCachedTokens(const std::string& text) const override {
    return Metric(ParsePrometheus(text), "vllm:prefix_cache_hits_total");
  }

  // vLLM's /tokenize takes a chat request and renders it as the chat endpoint does
  // (serving_tokenization.py: TokenizeChatRequest, add_generation_prompt defaults to true).
  Result<std::vector<int64_t>> RenderedTokenIds(const std::string& message) override {
    return ChatTokenizeIds(client(), base_url() + "/tokenize", message);
  }
  std::string RenderMethod() const override {
    return "POST /tokenize {messages, add_generation_prompt: true}";
  }

  // The vllm:cache_config_info gauge's enable_prefix_caching label.
  std::string PrefixCacheOff(const ServerFacts& facts) const override {
    auto it = facts.values.find("enable_prefix_caching");
    return it != facts.values.end() && it->second != "true" ? "enable_prefix_caching=" + it->second
                                                            : "";
  }

  std::string ColdHint() const override {
    return "vLLM answers POST /reset_prefix_cache with 200 even when the reset failed (its log "
           "says "
           "'Failed to reset prefix cache'): start it with VLLM_SERVER_DEV_MODE=1 and flush only "
           "when it is idle";
  }

 protected:
  std::string ProbePath() const override { return "/health"; }  // no generation in vLLM
};

}  // namespace

std::unique_ptr<Target> MakeVllmTarget(TargetOptions options) {
  return std::make_unique<VllmTarget>(std::move(options));
}

ControlRequests VllmControlRequests(const ControlInputs& in) {
  ControlRequests c;
  c.info = {{"03-version", "info", "GET", "/version", "", "", "GET /version"}};
  c.tokenize = {{"07-tokenize", "tokenize", "POST", "/tokenize",
                 TextTokenizeRequest(in.text).dump(), "application/json", "POST /tokenize"},
                {"08-tokenize-messages", "template", "POST", "/tokenize",
                 adapter::ChatTokenizeRequest(in.message).dump(), "application/json",
                 "POST /tokenize with messages (the chat template applied)"}};
  c.flush = {{"10-flush", "flush", "POST", "/reset_prefix_cache", "", "text/plain",
              "POST /reset_prefix_cache, idle"}};
  return c;
}

}  // namespace capq::internal
