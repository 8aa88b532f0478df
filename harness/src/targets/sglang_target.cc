// SGLang's adapter (target.h). Facts are from server-apis.md, SGLang's sources where cited and
// the recorded exchanges in tests/data/conformance/; each quirk is commented where it is handled.
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
using adapter::TakeLimits;
using adapter::TakeModels;
using adapter::TextTokenizeRequest;
using adapter::TokenCountFrom;

class SglangTarget : public Target {
 public:
  explicit SglangTarget(TargetOptions o) : Target(std::move(o)) {}
  Engine engine() const override { return Engine::kSglang; }

  Result<ServerFacts> Facts() override {
    ServerFacts f;
    // Newer builds serve /server_info; older ones /get_server_info.
    Result<nlohmann::json> info = GetJson("/server_info");
    std::string info_path = "/server_info";
    if (!info.ok()) {
      Result<nlohmann::json> old = GetJson("/get_server_info");
      if (!old.ok()) return info.status();
      info = std::move(old);
      info_path = "/get_server_info";
    }
    f.documents[info_path] = *info;
    TakeLimits(Engine::kSglang, *info, &f);
    // server_args carries the REQUESTED max_running_requests; the allocator may cut it (the seed:
    // 64 requested, 9 effective). The effective value is what a row pins: without it the key is
    // not reported, so a pinned row fails closed (recorded sugar-crush /server_info has none).
    f.values.erase("max_running_requests");
    if (info->contains("internal_states") && (*info)["internal_states"].is_array() &&
        !(*info)["internal_states"].empty()) {
      const auto& st = (*info)["internal_states"][0];
      if (st.contains("effective_max_running_requests_per_dp") &&
          st["effective_max_running_requests_per_dp"].is_number()) {
        int64_t per_dp = st["effective_max_running_requests_per_dp"].get<int64_t>();
        int64_t dp = info->value("dp_size", 1);
        f.values["max_running_requests"] = std::to_string(per_dp * std::max<int64_t>(dp, 1));
      }
      if (st.contains("memory_usage") && st["memory_usage"].contains("token_capacity") &&
          f.values.count("max_total_num_tokens") == 0) {
        f.values["max_total_num_tokens"] = ScalarText(st["memory_usage"]["token_capacity"]);
      }
    }
    if (info->contains("model_path") && (*info)["model_path"].is_string()) {
      f.model_path = (*info)["model_path"];
    }
    if (info->contains("version")) f.version = ScalarText((*info)["version"]);
    Result<nlohmann::json> models = GetJson("/v1/models");
    if (models.ok()) {
      f.documents["/v1/models"] = *models;
      TakeModels(*models, &f);
      // server_args.context_length is null unless --context-length was given; the context in
      // force is /v1/models max_model_len (model_config.context_len, http_server.py).
      const nlohmann::json& len = FirstModelField(*models, "max_model_len");
      if (f.values.count("context_length") == 0 && len.is_number()) {
        f.values["context_length"] = ScalarText(len);
      }
    }
    return f;
  }

  Result<FlushResult> Flush(MonoNs deadline_ns, const std::atomic<bool>* cancel) override {
    FlushResult fr;
    fr.method = "POST /flush_cache";
    std::string last;
    do {
      if (Cancelled(cancel)) return Status::Cancelled("interrupted while flushing");
      ++fr.attempts;
      Result<HttpResponse> r = client().Post(base_url() + "/flush_cache", "", "text/plain");
      if (!r.ok()) return r.status().WithContext("flush");
      if (r->status == 200) {
        fr.note = fr.attempts > 1
                      ? "flushed after " + std::to_string(fr.attempts - 1) + " busy refusal(s)"
                      : "flushed";
        return fr;
      }
      // 400 = requests still pending: SGLang flushes only when fully idle.
      if (r->status != 400) {
        return Status::FailedPrecondition("flush failed: POST /flush_cache returned HTTP " +
                                          std::to_string(r->status));
      }
      last = "HTTP 400 (busy)";
      Nap(200, cancel);
    } while (NowNs() < deadline_ns);
    return Status::FailedPrecondition("flush failed: the server refused POST /flush_cache (" +
                                      last + ") until the deadline, " +
                                      std::to_string(fr.attempts) + " attempts");
  }

  Result<int64_t> CountTokens(const std::string& text) override {
    return TokenCountFrom(
        client().Post(base_url() + "/tokenize", TextTokenizeRequest(text).dump()));
  }

  Result<std::vector<int64_t>> TokenIds(const std::string& text) override {
    return IdsFrom(client().Post(base_url() + "/tokenize", TextTokenizeRequest(text).dump()));
  }

  // SGLang's /v1/tokenize also takes a chat request (messages) and applies the template the
  // chat endpoint applies (serving_tokenize.py, TokenizeChatRequest in protocol.py).
  Result<std::vector<int64_t>> RenderedTokenIds(const std::string& message) override {
    return ChatTokenizeIds(client(), base_url() + "/v1/tokenize", message);
  }
  std::string RenderMethod() const override {
    return "POST /v1/tokenize {messages, add_generation_prompt: true}";
  }

  // /metrics is off unless SGLang starts with --enable-metrics (shared/design/server-apis.md §5).
  std::string MetricsHint() const override { return "start SGLang with --enable-metrics"; }

  std::string ColdHint() const override {
    return "SGLang's /flush_cache empties the radix cache of the server that answered it; behind "
           "a router it reaches one worker only, so point capq at the server itself";
  }

  // With --enable-cache-report SGLang writes {"cached_tokens": N} only for N > 0 and null
  // otherwise (entrypoints/openai/usage_processor.py; recorded: Qwen3.8 cold stream,
  // tests/data/conformance/recorded/sglang/); without it, null whatever was cached (recorded:
  // Hunyuan). /server_info reports the flag as enable_cache_report.
  CacheCounterRule CacheCounter(const ServerFacts& facts) const override {
    CacheCounterRule rule;
    auto it = facts.values.find("enable_cache_report");
    if (it != facts.values.end() && it->second == "true") {
      rule.absent_means_zero = true;
      rule.source =
          "SGLang with --enable-cache-report reports cached_tokens only when above zero "
          "(usage_processor.py; recorded Qwen3.8 cold stream): null means nothing was cached";
      return rule;
    }
    rule.launch_hint =
        "start SGLang with --enable-cache-report (per-request cached_tokens) or --enable-metrics "
        "(the server's cache counter)";
    return rule;
  }

  // /server_info disable_radix_cache (--disable-radix-cache).
  std::string PrefixCacheOff(const ServerFacts& facts) const override {
    auto it = facts.values.find("disable_radix_cache");
    return it != facts.values.end() && it->second != "false" ? "disable_radix_cache=" + it->second
                                                             : "";
  }

  ServerLoad ParseLoad(const std::string& text) const override {
    auto m = ParsePrometheus(text);
    return {Metric(m, "sglang:num_running_reqs"), Metric(m, "sglang:num_queue_reqs")};
  }
  std::optional<double> ParseCachedTokens(const std::string& text) const override {
    auto m = ParsePrometheus(text);
    // Counter names differ across versions; the gauge cache_hit_rate cannot be summed.
    for (const char* n : {"sglang:cached_tokens_total", "sglang:cache_hit_tokens_total"}) {
      if (auto v = Metric(m, n)) return v;
    }
    return std::nullopt;
  }

 protected:
  // SGLang's /health and /health_generate both generate one token by default: a probe that
  // generates is workload. /v1/models answers once the tokenizer manager is up, and generates none.
  std::string ProbePath() const override { return "/v1/models"; }
};

}  // namespace

std::unique_ptr<Target> MakeSglangTarget(TargetOptions options) {
  return std::make_unique<SglangTarget>(std::move(options));
}

ControlRequests SglangControlRequests(const ControlInputs& in) {
  ControlRequests c;
  c.info = {{"03-server-info", "info", "GET", "/server_info", "", "", "GET /server_info"}};
  c.info_fallback = {
      {"03-get-server-info", "info", "GET", "/get_server_info", "", "", "GET /get_server_info"}};
  c.tokenize = {{"07-tokenize", "tokenize", "POST", "/tokenize",
                 TextTokenizeRequest(in.text).dump(), "application/json", "POST /tokenize"},
                {"08-tokenize-messages", "template", "POST", "/v1/tokenize",
                 adapter::ChatTokenizeRequest(in.message).dump(), "application/json",
                 "POST /v1/tokenize with messages (the chat template applied)"}};
  c.flush = {
      {"10-flush", "flush", "POST", "/flush_cache", "", "text/plain", "POST /flush_cache, idle"}};
  c.readiness_note =
      "SGLang's /health generates one token unless SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION is "
      "off; capq's readiness probe uses GET /v1/models instead";
  return c;
}

}  // namespace capq::internal
