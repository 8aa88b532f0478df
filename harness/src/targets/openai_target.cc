// Any OpenAI-compatible server (TGI, trtllm-serve, Ollama, a gateway): all capq may assume is
// POST /v1/chat/completions and GET /v1/models. What it cannot prove there it says:
//  - no flush endpoint: a row must not ask for one (the row loader refuses it), and the cache is
//    proven cold by prompts no earlier request sent (each trial's corpus is its own) unless the
//    server reports cached tokens, which are then checked as on any engine;
//  - no limits to pin: identity is the image digest (CAPQ_IMAGE_DIGEST or CAPQ_CONTAINER) and the
//    served model name in /v1/models;
//  - a tokenizer only where the server has vLLM's or SGLang's POST /tokenize (many front one of
//    them); without it text_recount fails closed unless the row turns it off with a reason;
//  - no load metrics: the flush's idle wait has nothing to read, and the quiet period decides.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "adapter_common.h"
#include "capq/targets/http.h"

namespace capq::internal {
namespace {

using adapter::ChatTokenizeRequest;
using adapter::TakeModels;

class OpenAiTarget : public Target {
 public:
  explicit OpenAiTarget(TargetOptions o) : Target(std::move(o)) {}
  Engine engine() const override { return Engine::kOpenai; }

  Result<ServerFacts> Facts() override {
    ServerFacts f;
    Result<nlohmann::json> models = GetJson("/v1/models");
    if (!models.ok()) return models.status();
    f.documents["/v1/models"] = *models;
    TakeModels(*models, &f);
    return f;
  }

  Result<FlushResult> Flush(MonoNs, const std::atomic<bool>*) override {
    return Status::FailedPrecondition(
        "engine openai has no flush endpoint: the row must set cache.flush_before_trial: false");
  }

  Result<int64_t> CountTokens(const std::string& text) override {
    Result<std::vector<int64_t>> ids = TokenIds(text);
    if (!ids.ok()) return ids.status();
    return static_cast<int64_t>(ids->size());
  }

  Result<std::vector<int64_t>> TokenIds(const std::string& text) override {
    nlohmann::json req = {{"prompt", text}, {"add_special_tokens", false}};
    return Tokenize(req);
  }

  Result<std::vector<int64_t>> RenderedTokenIds(const std::string& message) override {
    return Tokenize(ChatTokenizeRequest(message));
  }
  std::string RenderMethod() const override {
    return "POST /tokenize {messages, add_generation_prompt: true}";
  }

  std::string ColdHint() const override {
    return "an OpenAI-compatible server offers no flush: prompts are unique across a "
           "qualification, so cached tokens beyond the template mean the server reused work "
           "capq cannot clear (a cache shared with other traffic, or a gateway's response cache)";
  }

  CacheCounterRule CacheCounter(const ServerFacts&) const override {
    CacheCounterRule rule;
    rule.cold_by_unique_prompts = true;
    rule.source =
        "engine openai: no flush and no cache counter, so the cache is cold by construction "
        "only: every prompt is one no earlier request sent (unique_prompts, warmup_disjoint)";
    return rule;
  }

  ServerLoad ParseLoad(const std::string&) const override { return {}; }

 protected:
  std::string ProbePath() const override { return "/v1/models"; }

 private:
  // vLLM's and SGLang's POST /tokenize, the one many OpenAI-compatible servers front.
  Result<std::vector<int64_t>> Tokenize(const nlohmann::json& req) {
    Result<HttpResponse> r = client().Post(base_url() + "/tokenize", req.dump());
    if (!r.ok()) return r.status();
    if (r->status == 404 || r->status == 405 || r->status == 400 || r->status == 422) {
      return Status::Unimplemented("the server has no /tokenize of vLLM's or SGLang's form (HTTP " +
                                   std::to_string(r->status) + ")");
    }
    if (r->status != 200) {
      return Status::Unavailable("POST /tokenize returned HTTP " + std::to_string(r->status));
    }
    try {
      const nlohmann::json answer = nlohmann::json::parse(r->body);
      std::vector<int64_t> ids;
      for (const auto& t : answer.at("tokens")) ids.push_back(t.get<int64_t>());
      return ids;
    } catch (const nlohmann::json::exception& e) {
      return Status::InvalidArgument(std::string("POST /tokenize: no token ids (") + e.what() +
                                     ")");
    }
  }
};

}  // namespace

std::unique_ptr<Target> MakeOpenAiTarget(TargetOptions options) {
  return std::make_unique<OpenAiTarget>(std::move(options));
}

}  // namespace capq::internal
