// The engine's adapter on a corpus (probe_internal.h): each call a trial makes (Facts, CountTokens,
// RenderedTokenIds, the load and cache metrics, Flush) runs once on the recorded answers served
// back from loopback and once on capq's dialect, and what each side made of it is compared: ok or
// the error, and which facts it found. Values are not compared.
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <set>

#include "capq/clock.h"
#include "capq/targets/target.h"
#include "probe_internal.h"

namespace capq::probe {
namespace {

struct Observed {
  std::string outcome;              // "ok" or "error: ..."
  std::set<std::string> traits;     // what the call found: "limit n_ctx", "served models", ...
  std::vector<std::string> misses;  // requests the corpus holds no answer to (recorded side)
};

struct Call {
  const char* name;
  std::function<Status(Target&, std::set<std::string>*)> run;
};

std::string Outcome(const Status& s) {
  if (s.ok()) return "ok";
  std::string m = s.message();
  if (m.size() > 160) m = m.substr(0, 157) + "...";
  return "error: " + m;
}

Status FactsCall(Target& t, std::set<std::string>* traits) {
  Result<ServerFacts> f = t.Facts();
  if (!f.ok()) return f.status();
  for (const auto& [key, value] : f->values) traits->insert("limit " + key);
  if (!f->served_models.empty()) traits->insert("served models");
  if (!f->model_path.empty()) traits->insert("model path");
  if (!f->version.empty()) traits->insert("version");
  if (f->sim_identity_digest) traits->insert("simulator identity digest");
  return Status::Ok();
}

Status MetricsCall(Target& t, std::set<std::string>* traits) {
  Result<std::string> m = t.Metrics();
  if (!m.ok()) return m.status();
  const ServerLoad load = t.ParseLoad(*m);
  if (load.running) traits->insert("running requests");
  if (load.waiting) traits->insert("waiting requests");
  if (t.ParseCachedTokens(*m)) traits->insert("cached-token counter");
  return Status::Ok();
}

std::vector<Call> Calls() {
  return {
      {"Facts()", FactsCall},
      {"CountTokens()",
       [](Target& t, std::set<std::string>*) {
         return t.CountTokens("The quick brown fox jumps over the lazy dog.").status();
       }},
      {"RenderedTokenIds()",
       [](Target& t, std::set<std::string>*) {
         Result<std::vector<int64_t>> ids = t.RenderedTokenIds("hello world");
         // An engine with no rendering endpoint says so on both sides alike.
         return ids.status();
       }},
      {"Metrics()", MetricsCall},
      {"Flush()",
       [](Target& t, std::set<std::string>*) {
         return t.Flush(NowNs() + 5'000'000'000, nullptr).status();
       }},
  };
}

Result<std::unique_ptr<Target>> AdapterFor(const ProbeEngine& e, const std::string& url,
                                           const std::string& api_key = "",
                                           bool insecure_tls = false) {
  Identity id;
  id.engine = e.sim ? Engine::kSim : e.dialect;
  id.sim_dialect = e.dialect;
  TargetOptions o;
  o.base_url = url;
  o.api_key = api_key;
  o.insecure_tls = insecure_tls;
  return MakeTarget(id, o);
}

// The context each engine's adapter reports (targets/engine_limits.h): SGLang's /v1/models
// max_model_len as context_length, vLLM's max_model_len, llama.cpp's per-slot n_ctx.
std::optional<int64_t> ContextTokens(const ServerFacts& f) {
  for (const char* key : {"context_length", "max_model_len", "n_ctx"}) {
    auto it = f.values.find(key);
    if (it == f.values.end()) continue;
    const long long v = std::atoll(it->second.c_str());
    if (v > 0) return v;
  }
  return std::nullopt;
}

std::vector<Observed> Observe(Target& t, const ReplayServer* replay) {
  std::vector<Observed> out;
  for (const Call& c : Calls()) {
    Observed o;
    const size_t before = replay ? replay->misses().size() : 0;
    o.outcome = Outcome(c.run(t, &o.traits));
    if (replay) {
      const std::vector<std::string> m = replay->misses();
      o.misses.assign(m.begin() + static_cast<std::ptrdiff_t>(before), m.end());
    }
    out.push_back(std::move(o));
  }
  return out;
}

void CompareCall(const char* name, const Observed& rec, const Observed& ref,
                 std::vector<ShapeDifference>* out, std::vector<std::string>* notes) {
  const bool differs = rec.outcome != ref.outcome || rec.traits != ref.traits;
  if (differs && !rec.misses.empty()) {
    notes->push_back(std::string("adapter ") + name +
                     ": not compared, the corpus holds no answer to " + rec.misses.front());
    return;
  }
  if (rec.outcome != ref.outcome) {
    out->push_back({"adapter", name, rec.outcome, ref.outcome});
    return;
  }
  for (const std::string& t : rec.traits) {
    if (!ref.traits.count(t))
      out->push_back({"adapter", std::string(name) + " " + t, "found", "not found"});
  }
  for (const std::string& t : ref.traits) {
    if (!rec.traits.count(t))
      out->push_back({"adapter", std::string(name) + " " + t, "not found", "found"});
  }
}

}  // namespace

ServerView LearnServer(const ProbeEngine& engine, const std::string& url,
                       const std::string& api_key, bool insecure_tls) {
  ServerView v;
  Result<std::unique_ptr<Target>> target = AdapterFor(engine, url, api_key, insecure_tls);
  if (!target.ok()) {
    v.facts_error = target.status().message();
    return v;
  }
  Result<ServerFacts> f = (*target)->Facts();
  if (!f.ok()) {
    v.facts_error = f.status().message();
    return v;
  }
  if (!f->served_models.empty()) v.model = f->served_models.front();
  v.context_tokens = ContextTokens(*f);
  auto slots = f->values.find("total_slots");
  if (slots != f->values.end()) v.slots = std::max(1, std::atoi(slots->second.c_str()));
  return v;
}

void CompareAdapter(const ProbeEngine& engine, const std::vector<RecordedAnswer>& recorded,
                    const std::string& reference_url, std::vector<ShapeDifference>* out,
                    std::vector<std::string>* notes) {
  Result<std::unique_ptr<ReplayServer>> replay = ReplayServer::Start(recorded);
  if (!replay.ok()) {
    notes->push_back("adapter: not compared: " + replay.status().message());
    return;
  }
  Result<std::unique_ptr<Target>> rec_target = AdapterFor(engine, (*replay)->url());
  Result<std::unique_ptr<Target>> ref_target = AdapterFor(engine, reference_url);
  if (!rec_target.ok() || !ref_target.ok()) {
    notes->push_back("adapter: not compared: " +
                     (!rec_target.ok() ? rec_target : ref_target).status().message());
    return;
  }
  const std::vector<Observed> rec = Observe(**rec_target, replay->get());
  const std::vector<Observed> ref = Observe(**ref_target, nullptr);
  const std::vector<Call> calls = Calls();
  for (size_t i = 0; i < calls.size(); ++i) CompareCall(calls[i].name, rec[i], ref[i], out, notes);
}

}  // namespace capq::probe
