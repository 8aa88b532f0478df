// capq rows new (capq/probe/row_new.h): the server's answers, then the row's YAML around them.
#include "capq/probe/row_new.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "capq/clock.h"
#include "capq/engine/profile.h"
#include "capq/model/row_loader.h"
#include "capq/probe/doctor.h"
#include "capq/targets/engine_limits.h"
#include "capq/targets/row_limits.h"

namespace capq {
namespace {

namespace fs = std::filesystem;

// What the server told: everything the row is written from.
struct Answers {
  ServerFacts facts;
  std::string prefix_cache_off;            // the adapter's reason, "" when the cache is on
  Result<TemplatePrefix> template_prefix;  // the chat template's shared tokens
  // Reported limits the row reader refuses as a pin (the simulator's llama.cpp dialect reports
  // n_params 0), with the reader's reason: written as comments, not pinned.
  std::map<std::string, std::string> unpinnable;
};

Result<Answers> Ask(const NewRowOptions& o) {
  Result<std::unique_ptr<Target>> made = MakeTarget(o.identity, o.target);
  if (!made.ok()) return made.status();
  Target& target = **made;
  const MonoNs deadline = NowNs() + static_cast<MonoNs>(o.ready_timeout_s * 1e9);
  Result<std::string> ready = target.Probe(deadline, nullptr);
  if (!ready.ok()) return Status::Unavailable(ready.status().message());
  Result<ServerFacts> facts = target.Facts();
  if (!facts.ok()) return Status::Unavailable("server info: " + facts.status().message());
  Answers a{*facts, target.PrefixCacheOff(*facts), target.MeasureTemplatePrefix("A", "Z"), {}};
  return a;
}

std::string Quoted(const std::string& s) { return nlohmann::json(s).dump(); }

// A reported limit as the row reader types it: numbers and words plain (an integer limit must not
// be a quoted string), anything else quoted.
std::string Scalar(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '.' || c == '-' || c == '+';
  });
  return plain && s != "null" && s != "Null" && s != "NULL" ? s : Quoted(s);
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The row's lines, and every value that had to be left to a person.
class Draft {
 public:
  void Line(const std::string& text) { yaml_ += text + "\n"; }
  // `key: value`, or `key: "TODO: why"` when the value is unknown.
  void Value(const std::string& indent, const std::string& key, const std::string& path,
             const std::string& value, const std::string& why_unknown) {
    if (!value.empty()) return Line(indent + key + ": " + value);
    todos_.push_back(path + ": " + why_unknown);
    Line(indent + key + ": " + Quoted("TODO: " + why_unknown));
  }
  NewRow Done() { return {yaml_, todos_}; }

 private:
  std::string yaml_;
  std::vector<std::string> todos_;
};

// The simulator's profile file, found where the shipped rows keep theirs unless named, kept only
// when it hashes to the digest the server reports.
std::string SimProfilePath(const NewRowOptions& o, const ServerFacts& f, std::string* why) {
  const fs::path file = !o.sim_profile.empty()
                            ? fs::path(o.sim_profile)
                            : fs::path("rows/sim/profiles") / (f.sim_profile + ".yaml");
  Result<engine::EngineProfile> p = engine::LoadProfile(file.string());
  if (!p.ok()) {
    *why = "the simulator runs profile '" + f.sim_profile + "', not readable at " + file.string() +
           " (name its file with --profile)";
    return "";
  }
  auto hex = [](const std::string& d) { return d.substr(d.rfind(':') + 1); };
  if (!f.sim_identity_digest || hex(engine::ProfileDigest(*p)) != hex(*f.sim_identity_digest)) {
    *why = file.string() + " does not hash to the digest the simulator reports (" +
           f.sim_identity_digest.value_or("none") + ")";
    return "";
  }
  std::error_code ec;
  const fs::path shown =
      o.row_dir.empty() ? fs::absolute(file) : fs::relative(fs::absolute(file), o.row_dir, ec);
  return ec ? fs::absolute(file).string() : shown.string();
}

void SimIdentity(const NewRowOptions& o, const Answers& a, Draft* d) {
  const ServerFacts& f = a.facts;
  std::string digest = f.sim_identity_digest.value_or("");
  if (digest.rfind("sha256:", 0) == 0) digest = "capq-sim@" + digest;
  d->Value("  ", "image", "identity.image", digest.empty() ? "" : Quoted(digest),
           "the server reports no capq_sim identity digest (GET /capq/sim)");
  std::string why;
  const std::string profile = SimProfilePath(o, f, &why);
  d->Value("  ", "sim_profile", "identity.sim_profile", profile.empty() ? "" : Quoted(profile),
           why);
  d->Value("  ", "time_scale", "identity.time_scale",
           f.sim_time_scale ? Number(*f.sim_time_scale) : "",
           "the server reports no capq_sim time_scale");
  d->Line(std::string("  sim_dialect: ") + EngineName(o.identity.sim_dialect));
}

// A hub snapshot path names the revision (".../snapshots/<40 hex>/").
std::string RevisionFromPath(const std::string& path) {
  const size_t at = path.find("/snapshots/");
  if (at == std::string::npos || path.size() < at + 11 + 40) return "";
  const std::string hex = path.substr(at + 11, 40);
  const bool ok = std::all_of(hex.begin(), hex.end(), [](unsigned char c) {
    return std::isdigit(c) || (c >= 'a' && c <= 'f');
  });
  return ok ? hex : "";
}

void EngineIdentity(const NewRowOptions& o, const Answers& a, Draft* d) {
  const ServerFacts& f = a.facts;
  std::string image, image_why = "no --container named: give the image as repo@sha256:<hex>";
  if (!o.container.empty()) {
    Result<std::string> digest = ContainerImageDigest(o.container);
    if (digest.ok()) image = Quoted(*digest);
    if (!digest.ok()) image_why = digest.status().message();
  }
  d->Value("  ", "image", "identity.image", image, image_why);
  d->Value("  ", "model", "identity.model", f.model_path.empty() ? "" : Quoted(f.model_path),
           "the server reports no model path: name the model repository");
  const std::string revision = RevisionFromPath(f.model_path);
  d->Value("  ", "model_revision", "identity.model_revision", revision,
           "the model path (" + (f.model_path.empty() ? "not reported" : f.model_path) +
               ") names no snapshot: give the 40-hex revision");
  d->Value("  ", "hardware", "identity.hardware", "",
           "the server does not report its hardware (e.g. 4 x Intel Arc Pro B70)");
  d->Value("  ", "driver", "identity.driver", "",
           "the server does not report its GPU driver (\"none\" on a CPU)");
}

// Every limit the server reports, as the row reader types it; a limit a real-engine row must pin
// that the server did not report is a TODO naming where the engine reports it, so rows check
// stops at that key rather than at a missing one.
void ServerExpect(const NewRowOptions& o, const Answers& a, Draft* d) {
  std::vector<const LimitSpec*> unreported;
  if (o.identity.engine != Engine::kSim) {
    for (const LimitSpec& l : ReportableLimits(o.identity.engine)) {
      if (l.required && !a.facts.values.count(l.key)) unreported.push_back(&l);
    }
  }
  if (a.facts.values.empty() && unreported.empty()) return;
  d->Line("  server_expect:   # every limit the server reports, under its engine's own names");
  for (const auto& [key, value] : a.facts.values) {
    auto skip = a.unpinnable.find(key);
    if (skip == a.unpinnable.end()) d->Line("    " + key + ": " + Scalar(value));
    if (skip != a.unpinnable.end()) d->Line("    # " + key + ": " + value + ": " + skip->second);
  }
  for (const LimitSpec* l : unreported) {
    d->Value("    ", l->key, std::string("identity.server_expect.") + l->key, "",
             std::string("the server did not report it; ") + EngineName(o.identity.engine) +
                 " reports it at " + l->source);
  }
}

void IdentitySection(const NewRowOptions& o, const Answers& a, Draft* d) {
  const ServerFacts& f = a.facts;
  d->Line("identity:");
  d->Line(std::string("  engine: ") + EngineName(o.identity.engine));
  if (o.identity.engine == Engine::kSim) {
    SimIdentity(o, a, d);
  } else {
    EngineIdentity(o, a, d);
  }
  d->Value("  ", "served_model_name", "identity.served_model_name",
           f.served_models.empty() ? "" : Quoted(f.served_models.front()),
           "GET /v1/models lists no model");
  ServerExpect(o, a, d);
}

int64_t MinRequests(const std::vector<SloGate>& slo) {
  int64_t n = 64;
  for (const SloGate& g : slo) n = std::max<int64_t>(n, MinRequestsForPercentile(g.percentile));
  return n;
}

void WorkloadSection(const NewRowOptions& o, const Answers& a, Draft* d) {
  d->Line("workload:");
  d->Line("  input_tokens: " + std::to_string(o.input_tokens));
  d->Line("  input_stddev_tokens: 0");
  d->Line("  output_tokens: " + std::to_string(o.output_tokens));
  d->Line("  output_stddev_tokens: 0");
  d->Line("  sampling: {temperature: 0, ignore_eos: true}");
  d->Line("  arrival: {kind: closed_loop}");
  d->Line("  prompt_corpus: synthetic");
  d->Line("cache:");
  d->Line(std::string("  prefix_cache: ") + (a.prefix_cache_off.empty() ? "enabled" : "disabled") +
          (a.prefix_cache_off.empty() ? "" : "   # " + a.prefix_cache_off));
  d->Line("  flush_before_trial: true");
  d->Line("  verify_cold: true");
  d->Line("warmup: {requests: 8, concurrency: 1}");
  d->Line("measured: {min_requests: " + std::to_string(MinRequests(o.slo)) +
          ", per_concurrency: 4}");
  d->Line("slo:");
  for (const SloGate& g : o.slo) {
    d->Line(std::string("  - {metric: ") + SloMetricName(g.metric) +
            ", percentile: " + Number(g.percentile) + ", below_ms: " + Number(g.below_ms) + "}");
  }
  d->Line("percentile_method: linear");
  const bool sim = o.identity.engine == Engine::kSim;
  d->Line(std::string("trials: {count: 3, quiet_period_s: ") + (sim ? "1" : "15") + "}");
}

// How the row is qualified: a real engine's image is compared with the one running, which no
// server reports, so the runtime is named in the environment (targets/target.cc).
std::string RunLine(const NewRowOptions& o) {
  const std::string qualify = "capq qualify THIS_FILE --url " + o.target.base_url;
  if (o.identity.engine == Engine::kSim) return qualify;
  if (!o.container.empty()) return "CAPQ_CONTAINER=" + o.container + " " + qualify;
  return "CAPQ_IMAGE_DIGEST=<identity.image> " + qualify + "   (or CAPQ_CONTAINER=<name>)";
}

void Header(const NewRowOptions& o, const Answers& a, Draft* d) {
  d->Line("# Written by `" + o.command_line + "` from the server at " + o.target.base_url + " on " +
          UtcNowText("%Y-%m-%d %H:%M UTC") + ".");
  d->Line("# Every value marked TODO could not be read from the server: `capq rows check` refuses");
  d->Line("# the row until each is filled in.");
  d->Line("# Run: " + RunLine(o));
  if (a.template_prefix.ok()) {
    d->Line("# The chat template: " + std::to_string(a.template_prefix->tokens) +
            " tokens every prompt shares (verify_cold allows them), " +
            std::to_string(a.template_prefix->prompt_tokens) + " in a one-letter prompt (" +
            a.template_prefix->method + ").");
  } else {
    d->Line("# The chat template's shared prefix could not be measured: " +
            a.template_prefix.status().message());
  }
}

NewRow Compose(const NewRowOptions& o, const Answers& a) {
  Draft d;
  Header(o, a, &d);
  d.Line("schema: capq/row/v1");
  d.Line("id: " + o.id);
  d.Line("title: " +
         Quoted(std::to_string(o.input_tokens) + " in / " + std::to_string(o.output_tokens) +
                " out on " + DoctorEngineName(o.identity)));
  IdentitySection(o, a, &d);
  WorkloadSection(o, a, &d);
  return d.Done();
}

// The reported limits the row reader refuses as pins, each with its reason: the reader is asked
// about every limit together (some engines' pins need others beside them), and each limit it
// names is left out in turn.
std::map<std::string, std::string> Unpinnable(const capq::Identity& identity,
                                              const ServerFacts& facts) {
  const std::string tag = "identity.server_expect.";
  std::map<std::string, std::string> out;
  // Asked as a simulator row of the engine's dialect: the same limits are checked the same way,
  // but a required limit the server did not report (a TODO of its own) hides none of the others.
  Row probe;
  probe.identity.engine = Engine::kSim;
  probe.identity.sim_dialect = LimitsEngine(identity);
  for (size_t tries = 0; tries < facts.values.size(); ++tries) {
    probe.identity.server_expect.clear();
    for (const auto& [key, value] : facts.values) {
      if (!out.count(key)) probe.identity.server_expect[key] = value;
    }
    std::optional<RowError> e = CheckServerExpect(&probe);
    if (!e || e->key_path.rfind(tag, 0) != 0) break;
    const std::string key = e->key_path.substr(tag.size());
    if (!facts.values.count(key) || out.count(key)) break;
    out[key] = "not pinned (" + e->message + ")";
  }
  return out;
}

}  // namespace

std::string NewRowId(const std::string& out_path, const Identity& identity, int64_t input_tokens,
                     int64_t output_tokens) {
  std::string raw = out_path.empty()
                        ? std::string(EngineName(identity.engine)) + "_" +
                              std::to_string(input_tokens) + "x" + std::to_string(output_tokens)
                        : fs::path(out_path).stem().string();
  std::string id;
  for (char c : raw) {
    const unsigned char u = static_cast<unsigned char>(c);
    id += std::isalnum(u) ? static_cast<char>(std::tolower(u)) : '_';
  }
  if (id.empty() || !std::islower(static_cast<unsigned char>(id[0]))) id = "row_" + id;
  return id.substr(0, 128);
}

Result<NewRow> WriteNewRow(const NewRowOptions& o) {
  Result<Answers> a = Ask(o);
  if (!a.ok()) return a.status();
  a->unpinnable = Unpinnable(o.identity, a->facts);
  NewRow row = Compose(o, *a);
  if (!row.todos.empty()) return row;
  // Nothing left to a person: the loader must take the row as written, or the writer is wrong.
  const fs::path as = fs::path(o.row_dir.empty() ? "." : o.row_dir) / (o.id + ".yaml");
  Result<Row> check = LoadRowFromString(row.yaml, as.string(), CheckServerExpect);
  if (!check.ok()) {
    return Status::Internal("the written row does not load: " + check.status().message());
  }
  return row;
}

}  // namespace capq
