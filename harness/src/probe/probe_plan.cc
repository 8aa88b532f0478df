// What capq probe asks a server, per engine (probe_internal.h): the requests its adapter makes
// (targets/<engine>_target.cc: info documents, tokenize, template rendering, flush, metrics), each
// with the body the adapter sends, and the streamed chats a trial sends.
#include <cstdio>

#include "probe_internal.h"

namespace capq::probe {
namespace {

std::string ChatBody(const std::string& model, const std::string& content, int max_tokens) {
  ojson body = ojson::object();
  body["model"] = model;
  body["messages"] = ojson::array({{{"role", "user"}, {"content", content}}});
  body["stream"] = true;
  body["max_tokens"] = max_tokens;
  body["temperature"] = 0;
  body["ignore_eos"] = true;
  body["stream_options"] = {{"include_usage", true}};
  return body.dump();
}

const char kStory[] =
    "The old lighthouse stood at the edge of the northern cliffs, where the wind never rested and "
    "the sea kept its own slow rhythm against the stones. Describe in a few sentences how its "
    "keeper spends one winter evening.";

const char* const kTags[] = {"Amber",  "Birch",  "Cedar",   "Delta",   "Ember",  "Fjord", "Garnet",
                             "Harbor", "Indigo", "Juniper", "Kestrel", "Lagoon", "Maple", "Nectar",
                             "Onyx",   "Pebble", "Quartz",  "Raven",   "Saffron"};

}  // namespace

std::string ProbePrompt(int i) {
  constexpr int kCount = static_cast<int>(sizeof(kTags) / sizeof(kTags[0]));
  std::string tag = kTags[i % kCount];
  if (i >= kCount) tag += std::to_string(i / kCount);
  return tag + ": " + kStory;
}

PlannedExchange FromControl(const ControlRequest& c) {
  WireRequest req;
  req.method = c.method;
  req.target = c.target;
  req.body = c.body;
  if (!c.content_type.empty()) req.content_type = c.content_type;
  return {c.name, c.kind, req, c.what};
}

ControlRequests ProbeControls(const ProbeEngine& e, int slots) {
  return ControlRequestsOf(e.dialect, {"Hello world! The quick brown fox.", "hello world", slots});
}

std::vector<PlannedExchange> FromControls(const std::vector<ControlRequest>& controls) {
  std::vector<PlannedExchange> out;
  for (const ControlRequest& c : controls) out.push_back(FromControl(c));
  return out;
}

std::vector<PlannedExchange> InfoExchanges(const ProbeEngine& e) {
  std::vector<PlannedExchange> out = {
      {"01-health", "health", Get("/health"), "GET /health"},
      {"02-v1-models", "models", Get("/v1/models"), "GET /v1/models"},
  };
  for (PlannedExchange& p : FromControls(ProbeControls(e, 1).info)) out.push_back(std::move(p));
  if (e.sim) {
    out.push_back({"05-capq-sim", "info", Get("/capq/sim"), "the simulator's identity"});
  }
  out.push_back({"06-metrics", "metrics", Get("/metrics"), "GET /metrics, idle"});
  return out;
}

PlannedExchange ChatExchange(const std::string& name, const std::string& kind,
                             const std::string& model, int prompt_index, int max_tokens,
                             const std::string& what) {
  return {name, kind,
          Post("/v1/chat/completions", ChatBody(model, ProbePrompt(prompt_index), max_tokens)),
          what};
}

std::string PseudoWords(int64_t n) {
  std::string out;
  out.reserve(static_cast<size_t>(n) * 7);
  for (int64_t i = 0; i < n; ++i) out += (i ? " w" : "w") + std::to_string(i);
  return out;
}

// Pseudo-words: every word is at least one token in any tokenizer, so more words than the context
// make a prompt longer than it.
PlannedExchange OverContextExchange(const std::string& model, int64_t words, int max_tokens) {
  return {"40-over-context", "over_context",
          Post("/v1/chat/completions", ChatBody(model, PseudoWords(words), max_tokens)),
          "streamed chat whose prompt (" + std::to_string(words) +
              " pseudo-words) is longer than the context"};
}

std::string WithContent(const std::string& body, const std::string* content,
                        const std::string& model) {
  ojson j = ojson::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return body;
  if (!model.empty() && j.contains("model")) j["model"] = model;
  if (content && j.contains("messages") && j["messages"].is_array() && !j["messages"].empty()) {
    j["messages"].back()["content"] = *content;
  }
  return j.dump();
}

std::string TwoDigits(int i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%02d", i);
  return buf;
}

}  // namespace capq::probe

namespace capq {

Result<ProbeEngine> ParseProbeEngine(const std::string& name) {
  ProbeEngine e;
  std::string dialect = name;
  if (name == "sim" || name.rfind("sim:", 0) == 0) {
    e.sim = true;
    dialect = name == "sim" ? EngineName(Identity{}.sim_dialect) : name.substr(4);
  }
  for (Engine d : kDialectEngines) {
    if (dialect == EngineName(d)) {
      e.dialect = d;
      return e;
    }
  }
  return Status::InvalidArgument("unknown engine '" + name +
                                 "' (expected sglang, vllm, llamacpp, or sim:sglang, sim:vllm, "
                                 "sim:llamacpp)");
}

std::string ProbeEngineName(const ProbeEngine& e) {
  return (e.sim ? "sim:" : "") + std::string(EngineName(e.dialect));
}

}  // namespace capq
