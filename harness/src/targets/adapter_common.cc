// What the engine adapters share (adapter_common.h).
#include "adapter_common.h"

#include <chrono>
#include <sstream>
#include <thread>

#include "capq/targets/engine_limits.h"

namespace capq::internal::adapter {

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

nlohmann::json TextTokenizeRequest(const std::string& text) {
  return {{"prompt", text}, {"add_special_tokens", false}};
}

nlohmann::json ChatTokenizeRequest(const std::string& message) {
  return {{"messages", UserTurn(message)}, {"add_generation_prompt", true}};
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

Result<int64_t> TokenCountFrom(const Result<HttpResponse>& r) {
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

Result<std::vector<int64_t>> ChatTokenizeIds(HttpClient& http, const std::string& url,
                                             const std::string& message) {
  Result<HttpResponse> r = http.Post(url, ChatTokenizeRequest(message).dump());
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

}  // namespace capq::internal::adapter
