// capq doctor's checks (capq/probe/doctor.h). Each asks the engine's adapter what a trial's
// preparation asks and judges the answer as the trial would: a check is kFail only where a trial
// would stop or a gate would fail closed on what the server says as launched.
#include "capq/probe/doctor.h"

#include <cstdio>
#include <memory>

#include "capq/clock.h"
#include "capq/probe/probe.h"

namespace capq {
namespace {

DoctorCheck Make(DoctorCheckId id, DoctorLevel level, std::string found, std::string fix = "") {
  return {id, level, std::move(found), std::move(fix)};
}

MonoNs DeadlineIn(double seconds) { return NowNs() + static_cast<MonoNs>(seconds * 1e9); }

std::string Join(const std::vector<std::string>& parts, const char* sep = ", ") {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

std::string Number(double v, const char* format = "%.0f") {
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

DoctorCheck InfoCheck(const Result<ServerFacts>& facts) {
  if (!facts.ok()) {
    return Make(DoctorCheckId::kInfo, DoctorLevel::kFail,
                "no server info (a trial stops here): " + facts.status().message(),
                "point --url at the engine's own server and name its engine with --engine");
  }
  std::vector<std::string> documents;
  for (const auto& [path, doc] : facts->documents.items()) documents.push_back(path);
  std::string found =
      "read " + Join(documents) + ": " + std::to_string(facts->values.size()) + " limits reported";
  if (!facts->version.empty()) found += ", version " + facts->version;
  if (facts->sim_identity_digest) {
    found += "; the simulator's profile " + facts->sim_profile + " at time scale " +
             (facts->sim_time_scale ? Number(*facts->sim_time_scale, "%g") : std::string("?"));
  }
  return Make(DoctorCheckId::kInfo, DoctorLevel::kOk, found);
}

DoctorCheck ModelCheck(const ServerFacts& facts) {
  if (facts.served_models.empty()) {
    return Make(DoctorCheckId::kModel, DoctorLevel::kFail,
                "GET /v1/models lists no model: a row has no served model name to pin");
  }
  std::string found = "serves " + Join(facts.served_models);
  if (!facts.model_path.empty()) found += " (model path " + facts.model_path + ")";
  return Make(DoctorCheckId::kModel, DoctorLevel::kOk, found);
}

DoctorCheck IdentityOf(const Target& target, const Row& row, const ServerFacts& facts) {
  Result<IdentityInputs> local = target.LocalIdentity();
  if (!local.ok()) {
    return Make(DoctorCheckId::kIdentity, DoctorLevel::kFail, local.status().message());
  }
  const IdentityCheck check = CheckIdentity(row, facts, *local);
  if (!check.ok()) {
    return Make(DoctorCheckId::kIdentity, DoctorLevel::kFail, check.Summary(),
                "start the server as row " + row.id + " pins it, or write a row for this server");
  }
  std::vector<std::string> matched, unverified;
  for (const IdentityField& f : check.fields) (f.verified ? matched : unverified).push_back(f.name);
  std::string found = "row " + row.id + ": " + Join(matched) + " match";
  if (!unverified.empty()) found += "; not verifiable here: " + Join(unverified);
  return Make(DoctorCheckId::kIdentity, DoctorLevel::kOk, found);
}

DoctorCheck MetricsCheck(const Target& target, const Result<std::string>& text) {
  if (!text.ok()) {
    return Make(DoctorCheckId::kMetrics, DoctorLevel::kWarn,
                text.status().message() + ": the server's load is unknown", target.MetricsHint());
  }
  const ServerLoad load = target.ParseLoad(*text);
  if (!load.running && !load.waiting) {
    return Make(DoctorCheckId::kMetrics, DoctorLevel::kWarn,
                "GET /metrics carries no running or queued gauge this engine's adapter knows: idle "
                "is not checked before a flush");
  }
  auto gauge = [](const std::optional<double>& v) { return v ? Number(*v) : std::string("?"); };
  return Make(
      DoctorCheckId::kMetrics, DoctorLevel::kOk,
      "GET /metrics: " + gauge(load.running) + " running, " + gauge(load.waiting) + " queued");
}

// What verify_cold can read on this server without a stream to look at: the engine's rule for a
// stream that carries no count (Target::CacheCounter) and the server's own counter in /metrics,
// which verify_cold falls back to.
DoctorCheck CounterCheck(const Target& target, const CacheCounterRule& rule,
                         const Result<std::string>& metrics) {
  const std::optional<double> server =
      metrics.ok() ? target.ParseCachedTokens(*metrics) : std::nullopt;
  const std::string server_text =
      server ? "/metrics counts " + Number(*server) + " cached prompt tokens so far"
             : "no cache counter in /metrics" +
                   (metrics.ok() ? std::string() : " (" + metrics.status().message() + ")");
  const DoctorLevel otherwise = server ? DoctorLevel::kOk : DoctorLevel::kWarn;
  const DoctorCheckId id = DoctorCheckId::kCacheCounter;
  if ((rule.absent_means_zero && !rule.only_if_any_reported) || rule.reported_always) {
    return Make(id, DoctorLevel::kOk, "per request: " + rule.source + "; " + server_text);
  }
  if (rule.cold_by_unique_prompts) {
    return Make(id, otherwise, server_text + "; " + rule.source);
  }
  if (rule.only_if_any_reported) {
    return Make(id, otherwise, server_text + "; per request: " + rule.source,
                server ? "" : rule.launch_hint);
  }
  if (!rule.launch_hint.empty()) {
    // The adapter knows from the server's own settings that no stream will carry a count.
    return Make(id, server ? DoctorLevel::kOk : DoctorLevel::kFail,
                "no per-request cached-token count as launched; " + server_text +
                    (server ? "" : ": verify_cold fails closed"),
                server ? "" : rule.launch_hint);
  }
  return Make(id, otherwise,
              server_text +
                  "; per request: the adapter has no rule for a stream without a count, and "
                  "doctor sends no stream: the first trial's verify_cold shows whether one comes");
}

// A row that does not verify a cold cache and reuses nothing reads no counter.
DoctorCheck CounterForRow(DoctorCheck check, const std::optional<Row>& row) {
  if (row && !row->cache.verify_cold && !row->reuse() && check.level == DoctorLevel::kFail) {
    check.level = DoctorLevel::kWarn;
    check.found += "; row " + row->id + " sets cache.verify_cold: false";
  }
  return check;
}

DoctorCheck SettingsCheck(const Target& target, const ServerFacts& facts,
                          const std::optional<Row>& row) {
  const std::vector<std::string> settings = target.CacheSettings(facts);
  std::string found =
      settings.empty() ? "the server reports no cache setting" : "in force: " + Join(settings);
  const std::string off = target.PrefixCacheOff(facts);
  if (!off.empty()) found += "; no prefix cache (" + off + ")";
  const bool server_on = off.empty();
  if (row && !settings.empty() && row->cache.prefix_cache != server_on) {
    return Make(DoctorCheckId::kCacheSettings, DoctorLevel::kWarn,
                found + "; row " + row->id + " declares cache.prefix_cache: " +
                    (row->cache.prefix_cache ? "enabled" : "disabled"));
  }
  return Make(DoctorCheckId::kCacheSettings, DoctorLevel::kOk, found);
}

// Flushes only once the server is idle (or its load cannot be read, as a trial would); a flush
// whose answer proves nothing leaves verify_cold to decide, with the adapter's advice.
DoctorCheck FlushCheck(Target& target, const CacheCounterRule& rule, const DoctorOptions& o) {
  const DoctorCheckId id = DoctorCheckId::kFlush;
  if (o.row && !o.row->cache.flush_before_trial) {
    return Make(id, DoctorLevel::kOk,
                "not sent: row " + o.row->id + " sets cache.flush_before_trial: false");
  }
  const MonoNs deadline = DeadlineIn(o.flush_timeout_s);
  Result<std::string> idle = target.WaitIdle(deadline, nullptr);
  if (!idle.ok()) return Make(id, DoctorLevel::kWarn, "not sent: " + idle.status().message());
  Result<FlushResult> flush = target.Flush(deadline, nullptr);
  if (!flush.ok()) {
    // Engine openai has no flush by design: its prompts alone keep the cache cold.
    if (rule.cold_by_unique_prompts) return Make(id, DoctorLevel::kWarn, flush.status().message());
    return Make(id, DoctorLevel::kFail, flush.status().message());
  }
  const std::string found = flush->method + ": " + flush->note + " (" + *idle + ")";
  if (flush->status_proves_nothing) {
    return Make(id, DoctorLevel::kWarn, found, target.ColdHint());
  }
  return Make(id, DoctorLevel::kOk, found);
}

// A trial calibrates prompts with the server's tokenizer and re-counts every measured stream's
// text with it (correctness.text_recount); without one the re-count fails closed and a reuse row
// cannot be sized.
DoctorCheck TokenizerCheck(Target& target, const std::optional<Row>& row) {
  const DoctorCheckId id = DoctorCheckId::kTokenizer;
  Result<int64_t> n = target.CountTokens("The quick brown fox jumps over the lazy dog.");
  if (n.ok()) {
    return Make(id, DoctorLevel::kOk,
                "the server's tokenizer counts " + std::to_string(*n) +
                    " tokens in a 9-word "
                    "sentence");
  }
  if (n.status().code() != Status::Code::kUnimplemented) {
    return Make(id, DoctorLevel::kFail, "tokenize (a trial stops here): " + n.status().message());
  }
  if (row && !row->correctness.text_recount.enabled && !row->reuse()) {
    return Make(id, DoctorLevel::kWarn,
                n.status().message() + "; row " + row->id + " turns text_recount off");
  }
  return Make(id, DoctorLevel::kFail,
              n.status().message() + ": the text re-count fails closed without it",
              "turn the row's correctness.text_recount off with a reason (a row with cache "
              "reuse needs the tokenizer)");
}

DoctorCheck TemplateCheck(Target& target, bool tokenizer) {
  Result<TemplatePrefix> p = target.MeasureTemplatePrefix("A", "Z");
  if (!p.ok()) {
    return Make(DoctorCheckId::kTemplate, DoctorLevel::kWarn,
                p.status().message() +
                    (tokenizer ? "; verify_cold allows the whole template overhead instead"
                               : "; verify_cold allows no cached token (fail closed)"));
  }
  return Make(DoctorCheckId::kTemplate, DoctorLevel::kOk,
              std::to_string(p->tokens) +
                  " tokens shared by every prompt (verify_cold's "
                  "allowance), " +
                  std::to_string(p->prompt_tokens) + " in a one-letter prompt: " + p->method);
}

}  // namespace

const char* DoctorLevelName(DoctorLevel level) {
  switch (level) {
    case DoctorLevel::kOk:
      return "ok";
    case DoctorLevel::kWarn:
      return "warn";
    case DoctorLevel::kFail:
      return "FAIL";
  }
  return "?";
}

const char* DoctorCheckName(DoctorCheckId id) {
  static constexpr const char* kNames[] = {
      "ready",         "info",           "model", "identity",  "metrics",
      "cache counter", "cache settings", "flush", "tokenizer", "template"};
  return kNames[static_cast<int>(id)];
}

const DoctorCheck* DoctorReport::Find(DoctorCheckId id) const {
  for (const DoctorCheck& c : checks) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

bool DoctorReport::reachable() const {
  const DoctorCheck* ready = Find(DoctorCheckId::kReady);
  return ready && ready->level == DoctorLevel::kOk;
}

std::vector<DoctorCheckId> DoctorReport::Deciding() const {
  std::vector<DoctorCheckId> out;
  for (const DoctorCheck& c : checks) {
    if (c.level == DoctorLevel::kFail) out.push_back(c.id);
  }
  return out;
}

std::vector<DoctorCheckId> DoctorReport::Warnings() const {
  std::vector<DoctorCheckId> out;
  for (const DoctorCheck& c : checks) {
    if (c.level == DoctorLevel::kWarn) out.push_back(c.id);
  }
  return out;
}

Result<Identity> ParseDoctorEngine(const std::string& name) {
  Identity id;
  if (name == EngineName(Engine::kOpenai)) {
    id.engine = Engine::kOpenai;
    return id;
  }
  Result<ProbeEngine> e = ParseProbeEngine(name);
  if (!e.ok()) {
    return Status::InvalidArgument("unknown engine '" + name +
                                   "' (expected sglang, vllm, llamacpp, openai, or sim, "
                                   "sim:vllm, sim:llamacpp)");
  }
  id.engine = e->sim ? Engine::kSim : e->dialect;
  id.sim_dialect = e->dialect;
  return id;
}

std::string DoctorEngineName(const Identity& identity) {
  if (identity.engine != Engine::kSim) return EngineName(identity.engine);
  return std::string("sim (") + EngineName(identity.sim_dialect) + " dialect)";
}

Result<DoctorReport> RunDoctor(const DoctorOptions& o) {
  Result<std::unique_ptr<Target>> made = MakeTarget(o.identity, o.target);
  if (!made.ok()) return made.status();
  Target& target = **made;
  DoctorReport r;
  Result<std::string> probe = target.Probe(DeadlineIn(o.ready_timeout_s), nullptr);
  if (!probe.ok()) {
    r.checks.push_back(Make(DoctorCheckId::kReady, DoctorLevel::kFail, probe.status().message()));
    return r;
  }
  r.checks.push_back(Make(DoctorCheckId::kReady, DoctorLevel::kOk,
                          *probe + " answered 200 (this probe generates nothing)"));
  Result<ServerFacts> facts = target.Facts();
  r.checks.push_back(InfoCheck(facts));
  const ServerFacts f = facts.ok() ? *facts : ServerFacts{};
  if (facts.ok()) {
    r.checks.push_back(ModelCheck(f));
    if (o.row) r.checks.push_back(IdentityOf(target, *o.row, f));
  }
  const Result<std::string> metrics = target.Metrics();
  r.checks.push_back(MetricsCheck(target, metrics));
  // The rule reads the engine's settings from its info: without them it would guess.
  const CacheCounterRule rule = target.CacheCounter(f);
  if (facts.ok()) {
    r.checks.push_back(CounterForRow(CounterCheck(target, rule, metrics), o.row));
    r.checks.push_back(SettingsCheck(target, f, o.row));
  }
  r.checks.push_back(FlushCheck(target, rule, o));
  r.checks.push_back(TokenizerCheck(target, o.row));
  const bool tokenizer = r.checks.back().level == DoctorLevel::kOk;
  r.checks.push_back(TemplateCheck(target, tokenizer));
  return r;
}

}  // namespace capq
