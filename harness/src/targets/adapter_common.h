// What the engine adapters share: each engine's adapter in a file of its own (sglang_target.cc,
// vllm_target.cc, llamacpp_target.cc, openai_target.cc, and sim_target.cc for the simulator, which
// wraps the one its dialect stands in for), made here by name; adapters.cc picks one for a row.
// Facts are from server-apis.md and the recorded exchanges in tests/data/conformance/; each quirk
// is commented where it is handled.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "capq/status.h"
#include "capq/targets/control_requests.h"
#include "capq/targets/http.h"
#include "capq/targets/target.h"

namespace capq::internal {

std::unique_ptr<Target> MakeSglangTarget(TargetOptions options);
std::unique_ptr<Target> MakeVllmTarget(TargetOptions options);
std::unique_ptr<Target> MakeLlamacppTarget(TargetOptions options);
std::unique_ptr<Target> MakeOpenAiTarget(TargetOptions options);
// The simulator's: everything goes to `dialect`, the adapter of the engine its dialect stands in
// for, but its identity, checked against the row's profile file at `profile_path`.
std::unique_ptr<Target> MakeSimTarget(TargetOptions options, std::string profile_path,
                                      std::unique_ptr<Target> dialect);

// Each engine's control requests (control_requests.h), beside its adapter.
ControlRequests SglangControlRequests(const ControlInputs& in);
ControlRequests VllmControlRequests(const ControlInputs& in);
ControlRequests LlamacppControlRequests(const ControlInputs& in);
int LlamacppBuildNumber(const std::string& path, const nlohmann::json& document);

namespace adapter {

bool Cancelled(const std::atomic<bool>* cancel);

// Sleeps up to `ms`, waking early on cancel.
void Nap(int ms, const std::atomic<bool>* cancel);

// A JSON scalar as the text ServerFacts::values holds ("8", "true", "0.9"); "" for anything else.
std::string ScalarText(const nlohmann::json& v);

// Copies every limit `engine` reports that the flat document `doc` carries under its name.
void TakeLimits(Engine engine, const nlohmann::json& doc, ServerFacts* f);

// The served model names (data[].id) and the first model root of a /v1/models answer.
void TakeModels(const nlohmann::json& models, ServerFacts* f);

// data[0][key] of a /v1/models answer, or null.
const nlohmann::json& FirstModelField(const nlohmann::json& models, const char* key);

// A single-turn chat: one user message.
nlohmann::json UserTurn(const std::string& message);

// The text form of SGLang's and vLLM's POST /tokenize: the text alone, no special tokens.
nlohmann::json TextTokenizeRequest(const std::string& text);

// The chat form of a tokenize request, as vLLM's and SGLang's endpoints take it: one user turn,
// rendered with the generation prompt.
nlohmann::json ChatTokenizeRequest(const std::string& message);

// The token ids of a tokenize answer.
Result<std::vector<int64_t>> IdsFrom(const Result<HttpResponse>& r);

// The token count of a tokenize answer: its "count" where the engine sends one (vLLM, SGLang),
// else the length of its "tokens" (llama.cpp sends only those).
Result<int64_t> TokenCountFrom(const Result<HttpResponse>& r);

// SGLang and vLLM tokenize a chat request ({"messages", "add_generation_prompt"}) with the template
// and special tokens their chat endpoint uses.
Result<std::vector<int64_t>> ChatTokenizeIds(HttpClient& http, const std::string& url,
                                             const std::string& message);

// The value of metric `name` in a ParsePrometheus() map, if the server reports it.
std::optional<double> Metric(const std::map<std::string, double>& m, const char* name);

}  // namespace adapter
}  // namespace capq::internal
