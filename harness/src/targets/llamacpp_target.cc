// llama.cpp's adapter (target.h). Facts are from server-apis.md, llama.cpp's sources where cited
// and the recordings in tests/data/conformance/llamacpp/ (numbered); each quirk is commented where
// it is handled.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "adapter_common.h"

namespace capq::internal {
namespace {

using adapter::Cancelled;
using adapter::FirstModelField;
using adapter::IdsFrom;
using adapter::Metric;
using adapter::Nap;
using adapter::ScalarText;
using adapter::TakeLimits;
using adapter::TakeModels;
using adapter::TokenCountFrom;
using adapter::UserTurn;

// POST /tokenize of llama.cpp: the text, with or without the special tokens its completion path
// adds.
nlohmann::json TokenizeRequest(const std::string& text, bool add_special) {
  return {{"content", text}, {"add_special", add_special}};
}

nlohmann::json ApplyTemplateRequest(const std::string& message) {
  return {{"messages", UserTurn(message)}};
}

constexpr const char* kHostCacheUnreported =
    "host prompt cache: not reported by the server (on unless launched with --cache-ram 0; "
    "8192 MiB by default, common/arg.cpp:1648-1652)";

class LlamacppTarget : public Target {
 public:
  explicit LlamacppTarget(TargetOptions o) : Target(std::move(o)) {}
  Engine engine() const override { return Engine::kLlamacpp; }

  Result<ServerFacts> Facts() override {
    ServerFacts f;
    Result<nlohmann::json> props = GetJson("/props");
    if (!props.ok()) return props.status();
    f.documents["/props"] = *props;
    const auto& p = *props;
    TakeLimits(Engine::kLlamacpp, p, &f);
    // n_ctx is the context of one slot (-c divided by -np), recording 04.
    if (p.contains("default_generation_settings")) {
      TakeLimits(Engine::kLlamacpp, p["default_generation_settings"], &f);
    }
    if (p.contains("model_path") && p["model_path"].is_string()) f.model_path = p["model_path"];
    if (p.contains("build_info")) f.version = ScalarText(p["build_info"]);
    if (Result<nlohmann::json> models = GetJson("/v1/models"); models.ok()) {
      f.documents["/v1/models"] = *models;
      TakeModels(*models, &f);
      // data[0].meta: the model's own sizes (recording 03).
      TakeLimits(Engine::kLlamacpp, FirstModelField(*models, "meta"), &f);
    }
    return f;
  }

  Result<FlushResult> Flush(MonoNs deadline_ns, const std::atomic<bool>* cancel) override {
    FlushResult fr;
    fr.method = "POST /slots/{id}?action=erase for every slot";
    Result<nlohmann::json> props = GetJson("/props");
    if (!props.ok()) return props.status().WithContext("flush");
    int slots = props->value("total_slots", 0);
    if (slots <= 0) return Status::FailedPrecondition("flush failed: /props reports no slots");
    HttpClient& http = client();
    for (int i = 0; i < slots; ++i) {
      while (true) {
        if (Cancelled(cancel)) return Status::Cancelled("interrupted while flushing");
        ++fr.attempts;
        Result<HttpResponse> r =
            http.Post(base_url() + "/slots/" + std::to_string(i) + "?action=erase", "{}");
        if (!r.ok()) return r.status().WithContext("flush");
        if (r->status == 200) break;
        if (r->status == 501) {
          return Status::FailedPrecondition(
              "flush failed: llama.cpp refused slot erase (HTTP 501: start the server with "
              "--slot-save-path)");
        }
        if (NowNs() >= deadline_ns) {
          return Status::FailedPrecondition("flush failed: slot " + std::to_string(i) +
                                            " erase returned HTTP " + std::to_string(r->status) +
                                            " until the deadline");
        }
        Nap(200, cancel);
      }
    }
    // Erase drops one slot's KV only (server-context.cpp prompt_clear); the host-memory prompt
    // cache (--cache-ram, on by default) survives it and restores an erased prompt (recordings
    // 37-40), and no endpoint reveals or clears that cache. So the status proves nothing.
    fr.status_proves_nothing = true;
    fr.note = "erased " + std::to_string(slots) +
              " slot(s); the host-memory prompt cache is not reachable over HTTP (empty only with "
              "--cache-ram 0): verify-cold decides";
    return fr;
  }

  // POST /apply-template renders the chat template without BOS (recording 10); /tokenize with
  // add_special adds it as the completion path does (recordings 08, 12).
  Result<std::vector<int64_t>> RenderedTokenIds(const std::string& message) override {
    const nlohmann::json req = ApplyTemplateRequest(message);
    Result<HttpResponse> r = client().Post(base_url() + "/apply-template", req.dump());
    if (!r.ok()) return r.status();
    if (r->status == 404) return Status::Unimplemented("the server has no /apply-template");
    std::string prompt;
    try {
      if (r->status == 200) prompt = nlohmann::json::parse(r->body).at("prompt");
    } catch (const nlohmann::json::exception&) {
    }
    if (prompt.empty()) {
      return Status::Unavailable("POST /apply-template returned HTTP " + std::to_string(r->status) +
                                 " without a prompt");
    }
    return IdsFrom(client().Post(base_url() + "/tokenize", TokenizeRequest(prompt, true).dump()));
  }
  std::string RenderMethod() const override {
    return "POST /apply-template, then POST /tokenize {add_special: true}";
  }

  // /metrics is off unless llama-server starts with --metrics (shared/design/server-apis.md §5).
  std::string MetricsHint() const override { return "start llama-server with --metrics"; }

  std::string ColdHint() const override {
    return "llama.cpp's slot erase keeps the host-memory prompt cache (--cache-ram, 8192 MiB by "
           "default), which restores earlier prompts into the slots: a qualification sends each "
           "prompt once, so a warm trial here resent prompts already served (the same seed "
           "again); start llama-server with --cache-ram 0 only where a trial must be repeated "
           "cold";
  }

  std::string MissHint() const override {
    return "llama.cpp keeps a prompt cache per slot: a task takes the idle slot most similar to "
           "its prompt, else the least recently used one (ts/server-context.cpp:1600-1676), so "
           "requests that share a prefix and run together take different slots, and only one of "
           "them finds the prefix unless the host prompt cache holds a copy";
  }

  Result<int64_t> CountTokens(const std::string& text) override {
    return TokenCountFrom(
        client().Post(base_url() + "/tokenize", TokenizeRequest(text, false).dump()));
  }

  Result<std::vector<int64_t>> TokenIds(const std::string& text) override {
    return IdsFrom(client().Post(base_url() + "/tokenize", TokenizeRequest(text, false).dump()));
  }

  // Every finished stream's usage carries prompt_tokens_details {"cached_tokens": N}, 0 included,
  // and its timings cache_n (recorded b9749: conformance/llamacpp/14, a cold request).
  CacheCounterRule CacheCounter(const ServerFacts&) const override {
    CacheCounterRule rule;
    rule.reported_always = true;
    rule.source =
        "llama.cpp writes cached_tokens (and timings.cache_n) on every stream, 0 included "
        "(recorded b9749, conformance/llamacpp/14)";
    return rule;
  }

  ServerLoad ParseLoad(const std::string& text) const override {
    auto m = ParsePrometheus(text);
    return {Metric(m, "llamacpp:requests_processing"), Metric(m, "llamacpp:requests_deferred")};
  }

  // /props says which optional endpoints are on (recording 04 in tests/data/conformance/llamacpp/):
  // endpoint_slots (the slot actions its flush uses) and endpoint_metrics (--metrics). No endpoint
  // reports the host prompt cache (no key of /props in b9749 or b10587, recordings 04 and 03).
  std::vector<std::string> CacheSettings(const ServerFacts& facts) const override {
    std::vector<std::string> out = Target::CacheSettings(facts);
    out.push_back(std::string(kHostCacheUnreported));
    if (!facts.documents.contains("/props")) return out;
    const nlohmann::json& props = facts.documents["/props"];
    for (const char* key : {"endpoint_slots", "endpoint_metrics"}) {
      if (props.is_object() && props.contains(key) && props[key].is_primitive()) {
        out.push_back(std::string(key) + "=" + props[key].dump() + " (/props)");
      }
    }
    return out;
  }

 protected:
  std::string ProbePath() const override { return "/health"; }  // 503 while loading; no generation
};

}  // namespace

std::unique_ptr<Target> MakeLlamacppTarget(TargetOptions options) {
  return std::make_unique<LlamacppTarget>(std::move(options));
}

int LlamacppBuildNumber(const std::string& path, const nlohmann::json& document) {
  const std::string build = path == "/props" && document.is_object() &&
                                    document.contains("build_info") &&
                                    document["build_info"].is_string()
                                ? document["build_info"].get<std::string>()
                                : "";
  if (build.size() < 2 || build[0] != 'b') return 0;
  return std::atoi(build.c_str() + 1);
}

ControlRequests LlamacppControlRequests(const ControlInputs& in) {
  ControlRequests c;
  c.info = {{"03-props", "info", "GET", "/props", "", "", "GET /props"},
            {"04-slots", "info", "GET", "/slots", "", "", "GET /slots"}};
  const nlohmann::json tok = TokenizeRequest(in.text, false);
  const nlohmann::json tmpl = ApplyTemplateRequest(in.message);
  c.tokenize = {{"07-tokenize", "tokenize", "POST", "/tokenize", tok.dump(), "application/json",
                 "POST /tokenize"},
                {"08-apply-template", "template", "POST", "/apply-template", tmpl.dump(),
                 "application/json", "POST /apply-template (the chat template rendered)"}};
  c.tokenize_rendered = [](const std::string& rendered) {
    const nlohmann::json again = TokenizeRequest(rendered, true);
    return ControlRequest{"09-tokenize-rendered",
                          "template",
                          "POST",
                          "/tokenize",
                          again.dump(),
                          "application/json",
                          "POST /tokenize of the rendered template, add_special"};
  };
  for (int i = 0; i < in.slots; ++i) {
    const std::string path = "/slots/" + std::to_string(i) + "?action=erase";
    c.flush.push_back({"10-flush-slot" + std::to_string(i), "flush", "POST", path, "{}",
                       "application/json", "POST " + path});
  }
  return c;
}

}  // namespace capq::internal
