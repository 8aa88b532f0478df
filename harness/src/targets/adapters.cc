// The engine adapters (SGLang, vLLM, llama.cpp) and the simulator's, which wraps the one its
// dialect stands in for. Facts are from server-apis.md and the recorded exchanges in
// tests/data/conformance/; each quirk is commented where it is handled.
#include <cmath>
#include <sstream>
#include <thread>

#include "capq/engine/profile.h"
#include "capq/model/engine_limits.h"
#include "capq/targets/http.h"
#include "capq/targets/target.h"
#include "openai_target.h"

namespace capq {
namespace {

bool Cancelled(const std::atomic<bool>* cancel) { return cancel && cancel->load(); }

void Nap(int ms, const std::atomic<bool>* cancel) {
  for (int waited = 0; waited < ms && !Cancelled(cancel); waited += 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string ScalarText(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) {
    std::ostringstream o;
    o.precision(12);
    o << v.get<double>();
    return o.str();
  }
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return "";
}

// Copies every limit `engine` reports that the flat document `doc` carries under its name.
void TakeLimits(Engine engine, const nlohmann::json& doc, ServerFacts* f) {
  if (!doc.is_object()) return;
  for (const LimitSpec& l : ReportableLimits(engine)) {
    auto it = doc.find(l.key);
    if (it != doc.end() && !it->is_null()) {
      std::string s = ScalarText(*it);
      if (!s.empty()) f->values[l.key] = s;
    }
  }
}

void TakeModels(const nlohmann::json& models, ServerFacts* f) {
  if (!models.is_object() || !models.contains("data") || !models["data"].is_array()) return;
  for (const auto& m : models["data"]) {
    if (m.contains("id") && m["id"].is_string()) f->served_models.push_back(m["id"]);
    if (f->model_path.empty() && m.contains("root") && m["root"].is_string()) {
      f->model_path = m["root"];
    }
  }
}

// data[0][key] of a /v1/models answer, or null.
const nlohmann::json& FirstModelField(const nlohmann::json& models, const char* key) {
  static const nlohmann::json kNull;
  if (!models.is_object() || !models.contains("data")) return kNull;
  const auto& data = models["data"];
  if (!data.is_array() || data.empty() || !data[0].is_object() || !data[0].contains(key)) {
    return kNull;
  }
  return data[0][key];
}

nlohmann::json UserTurn(const std::string& message) {
  return nlohmann::json::array({{{"role", "user"}, {"content", message}}});
}

Result<std::vector<int64_t>> IdsFrom(const Result<HttpResponse>& r) {
  if (!r.ok()) return r.status();
  if (r->status != 200) {
    return Status::Unavailable("POST /tokenize returned HTTP " + std::to_string(r->status));
  }
  try {
    auto j = nlohmann::json::parse(r->body);
    std::vector<int64_t> ids;
    for (const auto& t : j.at("tokens")) {
      // llama.cpp may answer [{"id":..,"piece":..}] when asked for pieces; plain ids otherwise.
      ids.push_back(t.is_object() ? t.at("id").get<int64_t>() : t.get<int64_t>());
    }
    return ids;
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("POST /tokenize: no token ids (") + e.what() + ")");
  }
}

// SGLang and vLLM tokenize a chat request ({"messages", "add_generation_prompt"}) with the template
// and special tokens their chat endpoint uses.
Result<std::vector<int64_t>> ChatTokenizeIds(HttpClient& http, const std::string& url,
                                             const std::string& message) {
  nlohmann::json req = {{"messages", UserTurn(message)}, {"add_generation_prompt", true}};
  Result<HttpResponse> r = http.Post(url, req.dump());
  if (r.ok() && (r->status == 404 || r->status == 400 || r->status == 422)) {
    return Status::Unimplemented("POST " + url + " with messages returned HTTP " +
                                 std::to_string(r->status));
  }
  return IdsFrom(r);
}

std::optional<double> Metric(const std::map<std::string, double>& m, const char* name) {
  auto it = m.find(name);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

// ---- SGLang ---------------------------------------------------------------------------------

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
    nlohmann::json req = {{"prompt", text}, {"add_special_tokens", false}};
    Result<HttpResponse> r = client().Post(base_url() + "/tokenize", req.dump());
    if (!r.ok()) return r.status();
    if (r->status == 404) return Status::Unimplemented("the server has no /tokenize");
    if (r->status != 200) {
      return Status::Unavailable("POST /tokenize returned HTTP " + std::to_string(r->status));
    }
    try {
      auto j = nlohmann::json::parse(r->body);
      if (j.contains("count") && j["count"].is_number()) return j["count"].get<int64_t>();
      if (j.contains("tokens") && j["tokens"].is_array()) {
        return static_cast<int64_t>(j["tokens"].size());
      }
    } catch (const nlohmann::json::exception&) {
    }
    return Status::InvalidArgument("POST /tokenize: no count or tokens in the answer");
  }

  Result<std::vector<int64_t>> TokenIds(const std::string& text) override {
    nlohmann::json req = {{"prompt", text}, {"add_special_tokens", false}};
    return IdsFrom(client().Post(base_url() + "/tokenize", req.dump()));
  }

  // SGLang's /v1/tokenize also takes a chat request (messages) and applies the template the
  // chat endpoint applies (serving_tokenize.py, TokenizeChatRequest in protocol.py).
  Result<std::vector<int64_t>> RenderedTokenIds(const std::string& message) override {
    return ChatTokenizeIds(client(), base_url() + "/v1/tokenize", message);
  }
  std::string RenderMethod() const override {
    return "POST /v1/tokenize {messages, add_generation_prompt: true}";
  }

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

// ---- vLLM ----------------------------------------------------------------------------------

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
    nlohmann::json req = {{"prompt", text}, {"add_special_tokens", false}};
    Result<HttpResponse> r = client().Post(base_url() + "/tokenize", req.dump());
    if (!r.ok()) return r.status();
    if (r->status == 404) return Status::Unimplemented("the server has no /tokenize");
    if (r->status != 200) {
      return Status::Unavailable("POST /tokenize returned HTTP " + std::to_string(r->status));
    }
    try {
      auto j = nlohmann::json::parse(r->body);
      if (j.contains("count")) return j["count"].get<int64_t>();
      if (j.contains("tokens")) return static_cast<int64_t>(j["tokens"].size());
    } catch (const nlohmann::json::exception&) {
    }
    return Status::InvalidArgument("POST /tokenize: no count or tokens in the answer");
  }

  Result<std::vector<int64_t>> TokenIds(const std::string& text) override {
    nlohmann::json req = {{"prompt", text}, {"add_special_tokens", false}};
    return IdsFrom(client().Post(base_url() + "/tokenize", req.dump()));
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

  std::string ColdHint() const override {
    return "vLLM answers POST /reset_prefix_cache with 200 even when the reset failed (its log "
           "says "
           "'Failed to reset prefix cache'): start it with VLLM_SERVER_DEV_MODE=1 and flush only "
           "when it is idle";
  }

 protected:
  std::string ProbePath() const override { return "/health"; }  // no generation in vLLM
};

// ---- llama.cpp -----------------------------------------------------------------------------

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
    nlohmann::json req = {{"messages", UserTurn(message)}};
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
    nlohmann::json tok = {{"content", prompt}, {"add_special", true}};
    return IdsFrom(client().Post(base_url() + "/tokenize", tok.dump()));
  }
  std::string RenderMethod() const override {
    return "POST /apply-template, then POST /tokenize {add_special: true}";
  }

  std::string ColdHint() const override {
    return "llama.cpp's slot erase keeps the host-memory prompt cache (--cache-ram, 8192 MiB by "
           "default), which restores earlier prompts into the slots: start llama-server with "
           "--cache-ram 0 so that erasing every slot leaves it cold";
  }

  Result<int64_t> CountTokens(const std::string& text) override {
    nlohmann::json req = {{"content", text}, {"add_special", false}};
    Result<HttpResponse> r = client().Post(base_url() + "/tokenize", req.dump());
    if (!r.ok()) return r.status();
    if (r->status == 404) return Status::Unimplemented("the server has no /tokenize");
    if (r->status != 200) {
      return Status::Unavailable("POST /tokenize returned HTTP " + std::to_string(r->status));
    }
    try {
      auto j = nlohmann::json::parse(r->body);
      if (j.contains("tokens")) return static_cast<int64_t>(j["tokens"].size());
    } catch (const nlohmann::json::exception&) {
    }
    return Status::InvalidArgument("POST /tokenize: no tokens in the answer");
  }

  Result<std::vector<int64_t>> TokenIds(const std::string& text) override {
    nlohmann::json req = {{"content", text}, {"add_special", false}};
    return IdsFrom(client().Post(base_url() + "/tokenize", req.dump()));
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

 protected:
  std::string ProbePath() const override { return "/health"; }  // 503 while loading; no generation
};

// ---- the simulator -------------------------------------------------------------------------

// The simulator speaks one real engine's dialect, so everything goes to that engine's adapter;
// only its identity (the profile digest and time scale, GET /capq/sim) is the simulator's own.
// The digest the server must report is the row's own profile file's, hashed here.
class SimTarget : public Target {
 public:
  SimTarget(TargetOptions o, std::string profile_path, std::unique_ptr<Target> dialect)
      : Target(std::move(o)),
        profile_path_(std::move(profile_path)),
        dialect_(std::move(dialect)) {}
  Engine engine() const override { return Engine::kSim; }

  Result<IdentityInputs> LocalIdentity() const override {
    Result<engine::EngineProfile> profile = engine::LoadProfile(profile_path_);
    if (!profile.ok()) return profile.status().WithContext("the row's simulator profile");
    IdentityInputs in;
    in.sim_profile_digest = engine::ProfileDigest(*profile);
    in.sim_served_model_name = profile->served_model_name;
    return in;
  }

  Result<ServerFacts> Facts() override {
    Result<ServerFacts> f = dialect_->Facts();
    if (!f.ok()) return f;
    Result<nlohmann::json> sim = GetJson("/capq/sim");
    if (!sim.ok()) return f;  // CheckIdentity says the digest was not reported
    f->documents["/capq/sim"] = *sim;
    const auto& s = *sim;
    if (s.contains("identity_digest") && s["identity_digest"].is_string()) {
      f->sim_identity_digest = s["identity_digest"].get<std::string>();
    }
    if (s.contains("time_scale") && s["time_scale"].is_number()) {
      f->sim_time_scale = s["time_scale"].get<double>();
    }
    if (s.contains("profile")) f->sim_profile = ScalarText(s["profile"]);
    return f;
  }
  Result<FlushResult> Flush(MonoNs deadline_ns, const std::atomic<bool>* cancel) override {
    return dialect_->Flush(deadline_ns, cancel);
  }
  Result<int64_t> CountTokens(const std::string& text) override {
    return dialect_->CountTokens(text);
  }
  Result<std::vector<int64_t>> TokenIds(const std::string& text) override {
    return dialect_->TokenIds(text);
  }
  Result<std::vector<int64_t>> RenderedTokenIds(const std::string& message) override {
    return dialect_->RenderedTokenIds(message);
  }
  std::string RenderMethod() const override { return dialect_->RenderMethod(); }
  std::string ColdHint() const override { return dialect_->ColdHint(); }
  CacheCounterRule CacheCounter(const ServerFacts& facts) const override {
    return dialect_->CacheCounter(facts);
  }
  ServerLoad ParseLoad(const std::string& text) const override {
    ServerLoad l = dialect_->ParseLoad(text);
    auto m = ParsePrometheus(text);
    if (!l.running) l.running = Metric(m, "capq_sim:running");
    if (!l.waiting) l.waiting = Metric(m, "capq_sim:waiting");
    return l;
  }
  std::optional<double> ParseCachedTokens(const std::string& text) const override {
    if (auto v = Metric(ParsePrometheus(text), "capq_sim:cached_tokens_total")) return v;
    return dialect_->ParseCachedTokens(text);
  }

 protected:
  // The simulator's /health never generates in any dialect (tested in tests/sim).
  std::string ProbePath() const override { return "/health"; }

 private:
  std::string profile_path_;  // the row's identity.sim_profile
  std::unique_ptr<Target> dialect_;
};

Result<std::unique_ptr<Target>> MakeEngineTarget(Engine engine, const TargetOptions& options) {
  switch (engine) {
    case Engine::kSglang:
      return std::unique_ptr<Target>(new SglangTarget(options));
    case Engine::kVllm:
      return std::unique_ptr<Target>(new VllmTarget(options));
    case Engine::kLlamacpp:
      return std::unique_ptr<Target>(new LlamacppTarget(options));
    case Engine::kOpenai:
      return internal::MakeOpenAiTarget(options);
    case Engine::kSim:
      break;
  }
  return Status::InvalidArgument("unknown engine");
}

}  // namespace

Result<std::unique_ptr<Target>> MakeTarget(const Identity& identity, const TargetOptions& options) {
  if (options.base_url.rfind("http://", 0) != 0 && options.base_url.rfind("https://", 0) != 0) {
    return Status::InvalidArgument("server URL must start with http:// or https://, got '" +
                                   options.base_url + "'");
  }
  Result<std::unique_ptr<Target>> t = MakeEngineTarget(LimitsEngine(identity), options);
  if (!t.ok() || identity.engine != Engine::kSim) return t;
  return std::unique_ptr<Target>(new SimTarget(options, identity.sim_profile, std::move(*t)));
}

Result<std::unique_ptr<Target>> MakeTarget(Engine engine, const TargetOptions& options) {
  Identity id;
  id.engine = engine;
  return MakeTarget(id, options);
}

}  // namespace capq
