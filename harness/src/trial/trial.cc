// RunTrial: prepare, measure, decode, validate, decide, write (issue 4; seed Parts III-IV).
#include "capq/trial/trial.h"

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "capq/clock.h"
#include "capq/log.h"
#include "capq/measurement/decode.h"
#include "capq/measurement/fail_fast.h"
#include "capq/measurement/loadgen.h"
#include "capq/measurement/raw_evidence.h"
#include "capq/model/plan.h"
#include "capq/model/row_loader.h"
#include "capq/record/artifacts.h"
#include "capq/targets/target.h"
#include "trial_internal.h"

namespace capq {
namespace {

bool Cancelled(const std::atomic<bool>* c) { return c && c->load(); }

// Samples /metrics on its own connection every `period_ms` until Stop(): the server's view of
// the trial (running, queued, KV use) beside the client's.
class MetricsSampler {
 public:
  MetricsSampler(Identity identity, TargetOptions opts, int period_ms)
      : identity_(std::move(identity)), opts_(std::move(opts)), period_ms_(period_ms) {}
  ~MetricsSampler() { Stop(); }
  void Start(MonoNs t0) {
    t0_ = t0;
    thread_ = std::thread([this] { Loop(); });
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<nlohmann::json> TakeLines() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(lines_);
  }

 private:
  void Loop() {
    opts_.control_timeout_s = 2;
    Result<std::unique_ptr<Target>> t = MakeTarget(identity_, opts_);
    if (!t.ok()) return;
    while (!stop_) {
      MonoNs now = NowNs();
      Result<std::string> text = (*t)->Metrics();
      nlohmann::json line = {
          {"kind", "sample"}, {"t_ns", now}, {"since_start_ms", NsToMs(now - t0_)}};
      if (text.ok()) {
        line["values"] = ParsePrometheus(*text);
        if (auto cached = (*t)->ParseCachedTokens(*text)) line["cached_tokens_total"] = *cached;
        // Under the engine's own names (its adapter): the queue an open-loop trial is judged on.
        const ServerLoad load = (*t)->ParseLoad(*text);
        if (load.running) line["running"] = *load.running;
        if (load.waiting) line["waiting"] = *load.waiting;
      } else {
        line["error"] = text.status().message();
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        lines_.push_back(std::move(line));
      }
      for (int waited = 0; waited < period_ms_ && !stop_; waited += 10) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }
  Identity identity_;
  TargetOptions opts_;
  int period_ms_;
  MonoNs t0_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<nlohmann::json> lines_;
};

nlohmann::json Snapshot(Target& t, const char* kind, MonoNs t0, std::string* raw_text) {
  MonoNs now = NowNs();
  nlohmann::json line = {{"kind", kind}, {"t_ns", now}, {"since_start_ms", NsToMs(now - t0)}};
  Result<std::string> text = t.Metrics();
  if (text.ok()) {
    line["values"] = ParsePrometheus(*text);
    line["text"] = *text;
    if (raw_text) *raw_text = *text;
  } else {
    line["error"] = text.status().message();
  }
  return line;
}

void AppendJsonLine(const nlohmann::json& line, std::string* out) {
  *out += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  *out += '\n';
}

std::string Jsonl(const std::vector<nlohmann::json>& lines) {
  std::string out;
  for (const auto& l : lines) AppendJsonLine(l, &out);
  return out;
}

struct TrialState {
  const Row* row = nullptr;
  const TrialOptions* opt = nullptr;
  VerdictContext ctx;
  TrialVerdict verdict;
  std::optional<TrialMetrics> metrics;
  std::optional<TrialPlan> plan;
  std::optional<LoadResult> load;
  std::vector<RequestResult> warm, meas;  // the decoded streams, by phase, in record order
  nlohmann::json identity = {{"schema", kIdentitySchema}};
  nlohmann::json server_info = {{"schema", kServerInfoSchema}};
  std::vector<nlohmann::json> server_metrics;
  nlohmann::json metrics_extra = nlohmann::json::object();
  nlohmann::json recount;  // recount.json; null until the text was re-counted
  FailFastRules fail_fast;
  // Opened when the load starts: the staging directory, and raw.jsonl(.zst) in it, written while
  // the load runs (raw_evidence.h).
  std::optional<TrialDirWriter> dir;
  std::unique_ptr<EvidenceWriter> evidence;
  // plan.json in `dir` is the plan as it stands: written when the load starts and again when the
  // calibration rewords it, so the trial's end need not build its JSON (MBs at thousands of
  // prompts) a second time when the streams' results are largest.
  bool plan_written = false;
};

Status WritePlan(TrialState& s) {
  CAPQ_RETURN_IF_ERROR(s.dir->Write("plan.json", PlanToJson(*s.plan).dump(1) + "\n"));
  s.plan_written = true;
  return Status::Ok();
}

void Progress(const TrialOptions& o, const std::string& line) {
  if (o.on_progress) o.on_progress(line);
}

// What `capq validate` needs to re-derive a fail-fast stop from the records: the rules the load
// ran under and the request that stopped it.
nlohmann::json FailFastHeader(const TrialState& s) {
  const FailFastRules& f = s.fail_fast;
  nlohmann::json j = {{"enabled", f.enabled},
                      {"stall_timeout_s", f.stall_timeout_s},
                      {"stall_timeout_wall_s", f.stall_timeout_wall_s},
                      {"served_model_name", f.served_model_name},
                      {"stopped_by", nullptr}};
  if (!s.load->stopped_by.empty()) {
    j["stopped_by"] = s.load->stopped_by;
    j["stop_reason"] = s.load->stop_reason;
  }
  return j;
}

// The raw evidence's last line: the load's times and what fail fast did.
nlohmann::json RawEnd(const TrialState& s) {
  return {{"end",
           {{"anchor_mono_ns", s.load->anchor.mono_ns},
            {"anchor_unix_ns", s.load->anchor.unix_ns},
            {"start_ns", s.load->start_ns},
            {"measured_start_ns", s.load->measured_start_ns},
            {"end_ns", s.load->end_ns},
            {"interrupted", s.load->interrupted},
            {"recorder_wait_ns", s.load->recorder_wait_ns},
            {"fail_fast", FailFastHeader(s)}}}};
}

// Ends the raw evidence (its last line, then fsync) and lists it in SHA256SUMS.
Status SealEvidence(TrialState& s) {
  if (!s.evidence) return Status::Ok();
  if (s.load) s.evidence->Append(RawEnd(s).dump());
  Status closed = s.evidence->Close();
  const std::string path = s.evidence->path();
  s.evidence.reset();
  CAPQ_RETURN_IF_ERROR(closed);
  return s.dir->Adopt(path.substr(path.find_last_of('/') + 1));
}

// Writes whatever the trial has: a trial that could not run still leaves its verdict and why.
Status WriteDirectory(TrialState& s, const std::string& dir) {
  if (!s.dir) {
    Result<TrialDirWriter> created = TrialDirWriter::Create(dir);
    if (!created.ok()) return created.status();
    s.dir = std::move(*created);
  }
  TrialDirWriter* w = &*s.dir;
  CAPQ_RETURN_IF_ERROR(SealEvidence(s));
  CAPQ_RETURN_IF_ERROR(w->Write("row.yaml", RowToYaml(*s.row)));
  CAPQ_RETURN_IF_ERROR(w->Write("command.txt", s.opt->command_line + "\n"));
  if (s.plan && !s.plan_written) CAPQ_RETURN_IF_ERROR(WritePlan(s));
  if (s.load) {
    // A line at a time: thousands of results held as JSON objects weigh four times their text.
    std::string res;
    for (const auto* phase : {&s.warm, &s.meas}) {
      for (const auto& r : *phase) AppendJsonLine(RequestResultToJson(r), &res);
    }
    CAPQ_RETURN_IF_ERROR(w->Write("results.jsonl", res));
  }
  if (s.metrics) {
    nlohmann::json m = MetricsToJson(*s.metrics);
    m["schema"] = kMetricsSchema;
    for (auto& [k, v] : s.metrics_extra.items()) m[k] = v;
    CAPQ_RETURN_IF_ERROR(w->Write("metrics.json", m.dump(1) + "\n"));
  }
  CAPQ_RETURN_IF_ERROR(w->Write("server_info.json", s.server_info.dump(1) + "\n"));
  if (!s.server_metrics.empty()) {
    CAPQ_RETURN_IF_ERROR(w->Write("server_metrics.jsonl", Jsonl(s.server_metrics)));
  }
  CAPQ_RETURN_IF_ERROR(w->Write("identity.json", s.identity.dump(1) + "\n"));
  if (!s.recount.is_null()) {
    CAPQ_RETURN_IF_ERROR(w->Write("recount.json", s.recount.dump(1) + "\n"));
  }
  CAPQ_RETURN_IF_ERROR(w->Write("verdict.json", VerdictToJson(s.verdict, s.ctx).dump(1) + "\n"));
  return w->Commit();
}

TrialReport Finish(TrialState& s) {
  TrialReport rep;
  rep.verdict = s.verdict;
  rep.metrics = s.metrics;
  Status st = WriteDirectory(s, s.opt->out_dir);
  rep.dir = s.opt->out_dir;
  if (!st.ok()) {
    // The evidence could not be kept: a trial without its proof is not a result.
    rep.verdict.outcome = TrialOutcome::kCouldNotRun;
    rep.verdict.reasons.push_back("the trial directory could not be written: " + st.message());
  }
  return rep;
}

TrialReport CouldNotRun(TrialState& s, const std::string& why, bool interrupted = false) {
  s.verdict.outcome = interrupted ? TrialOutcome::kInterrupted : TrialOutcome::kCouldNotRun;
  s.verdict.latency_pass = false;
  s.verdict.correctness_pass = false;
  s.verdict.reasons.push_back(why);
  s.ctx.complete = false;
  Progress(*s.opt, (interrupted ? "interrupted: " : "could not run: ") + why);
  return Finish(s);
}

// An open-loop trial's pool and in-flight cap (PlannedSpec).
constexpr int kOpenLoopPoolConnections = 256;
constexpr int kOpenLoopMaxInFlight = 4096;

std::string LoadLine(const LoadProgress& p, const std::string& label) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s %s: %d/%d done, %d in flight, %d failed",
                p.phase == Phase::kWarmup ? "warm-up" : "measured", label.c_str(), p.completed,
                p.total, p.in_flight, p.failed);
  return buf;
}

// ---- The phases of a trial ------------------------------------------------------------------
// Each returns std::nullopt to go on, or the report of a trial that ended there (could not run,
// interrupted). They pass their results to the next through TrialState and Trial.

// What the phases share beyond the evidence in TrialState.
struct Trial {
  TrialState s;
  Row effective;  // the row as sent: a sim row's model name comes from its profile
  TargetOptions topts;
  std::unique_ptr<Target> target;
  MonoNs t0 = 0;
  MonoNs setup_deadline = 0;
  double scale = 1.0;
  internal::Evidence ev;  // what the verdict needs besides the records (identity.json, recount)
  std::string before_text, after_text;  // /metrics around the load
};

using PhaseEnd = std::optional<TrialReport>;

bool IsCancel(const Status& st) { return st.code() == Status::Code::kCancelled; }

void StartTrial(Trial& t, const Row& row, const TrialOptions& opt) {
  t.s.row = &row;
  t.s.opt = &opt;
  t.effective = row;
  t.t0 = NowNs();
  t.scale = row.identity.time_scale > 0 ? row.identity.time_scale : 1.0;
  VerdictContext& c = t.s.ctx;
  c.row_id = row.id;
  c.concurrency = opt.concurrency;
  c.trial_index = opt.trial_index;
  c.phase = opt.phase;
  c.time_scale = t.scale;
  c.started_utc = FormatUtc(RealtimeAnchor::Take().unix_ns);
  c.insecure_tls = opt.insecure_tls;
  c.complete = false;
  if (opt.insecure_tls) t.s.identity["insecure_tls"] = true;
  t.topts.base_url = opt.url;
  t.topts.api_key = opt.api_key;
  t.topts.insecure_tls = opt.insecure_tls;
}

// Reachable and ready (a probe that generates nothing), then identity: pinned vs running.
PhaseEnd PinIdentity(Trial& t) {
  const Row& row = *t.s.row;
  const TrialOptions& opt = *t.s.opt;
  Result<uint64_t> seed = TrialSeed(row, opt.trial_index, opt.seed);
  if (!seed.ok()) return CouldNotRun(t.s, seed.status().message());
  t.s.ctx.seed = *seed;
  if (opt.concurrency < 1) return CouldNotRun(t.s, "concurrency must be at least 1");
  Result<std::unique_ptr<Target>> target = MakeTarget(row.identity, t.topts);
  if (!target.ok()) return CouldNotRun(t.s, target.status().message());
  t.target = std::move(*target);
  t.setup_deadline = NowNs() + static_cast<MonoNs>(opt.setup_timeout_s * 1e9);

  Progress(opt, "probing " + t.target->base_url());
  Result<std::string> probe = t.target->Probe(t.setup_deadline, opt.cancel);
  if (!probe.ok()) {
    return CouldNotRun(t.s, "server unreachable: " + probe.status().message(),
                       IsCancel(probe.status()));
  }
  Result<ServerFacts> facts = t.target->Facts();
  if (!facts.ok()) return CouldNotRun(t.s, "server info unavailable: " + facts.status().message());
  nlohmann::json& info = t.s.server_info;
  info["documents"] = facts->documents;
  info["limits"] = facts->values;
  info["served_models"] = facts->served_models;
  info["model_path"] = facts->model_path;
  info["version"] = facts->version;
  // What the server must show (a real engine's running image, the digest of a sim row's profile),
  // as the target finds it on this side.
  Result<IdentityInputs> id_in = t.target->LocalIdentity();
  if (!id_in.ok()) return CouldNotRun(t.s, id_in.status().message());
  if (row.identity.engine == Engine::kSim && t.effective.identity.served_model_name.empty()) {
    t.effective.identity.served_model_name = id_in->sim_served_model_name;
  }
  IdentityCheck check = CheckIdentity(row, *facts, *id_in);
  t.s.identity["check"] = check.ToJson();
  if (!check.ok()) return CouldNotRun(t.s, check.Summary());
  t.ev.served_model_name = t.effective.identity.served_model_name;
  t.ev.cache_counter = t.target->CacheCounter(*facts);
  t.s.identity["served_model_name"] = t.ev.served_model_name;
  t.s.identity["cache_counter"] = CacheCounterRuleToJson(t.ev.cache_counter);
  return std::nullopt;
}

// Idle, flushed (with the engine's advice for a flush that leaves prompts behind), ready.
PhaseEnd FlushAndProbe(Trial& t) {
  const Row& row = *t.s.row;
  const TrialOptions& opt = *t.s.opt;
  Target& target = *t.target;
  Progress(opt, "waiting for idle");
  Result<std::string> idle = target.WaitIdle(t.setup_deadline, opt.cancel);
  if (!idle.ok()) return CouldNotRun(t.s, idle.status().message(), IsCancel(idle.status()));
  t.s.identity["idle"] = *idle;
  if (row.cache.flush_before_trial) {
    Progress(opt, "flushing the prefix cache");
    Result<FlushResult> flush = target.Flush(t.setup_deadline, opt.cancel);
    if (!flush.ok()) return CouldNotRun(t.s, flush.status().message(), IsCancel(flush.status()));
    t.ev.cold_hint = target.ColdHint();
    t.s.identity["flush"] = {{"method", flush->method},
                             {"attempts", flush->attempts},
                             {"status_proves_nothing", flush->status_proves_nothing},
                             {"note", flush->note},
                             {"cold_hint", t.ev.cold_hint}};
  } else {
    t.s.identity["flush"] = {{"method", "none"},
                             {"note", "the row sets flush_before_trial: false"}};
  }
  Result<std::string> ready = target.Probe(t.setup_deadline, opt.cancel);
  if (!ready.ok()) {
    return CouldNotRun(t.s, "server not ready after the flush: " + ready.status().message(),
                       IsCancel(ready.status()));
  }
  t.s.identity["readiness_probe"] = *ready;
  t.s.identity["readiness_probe_generates"] = false;
  return std::nullopt;
}

// The token that starts a prompt led by a given word, as the server prefills it: rendered through
// its chat template (the token after the template's shared prefix, measured on two one-letter
// messages), else the word tokenized alone (which can differ from the token in context).
struct FirstTokens {
  FirstTokenFn fn;
  std::string method;  // empty: the server tokenizes nothing, no check is possible
};
FirstTokens MakeFirstTokens(Target& target) {
  FirstTokens f;
  Result<TemplatePrefix> probe = target.MeasureTemplatePrefix("A", "Z");
  if (probe.ok()) {
    const size_t at = static_cast<size_t>(probe->tokens);
    f.fn = [&target, at](const std::string& lead) -> Result<int64_t> {
      Result<std::vector<int64_t>> ids = target.RenderedTokenIds(lead);
      if (!ids.ok()) return ids.status();
      if (ids->size() <= at) return Status::Internal("the rendered prompt ends in the template");
      return (*ids)[at];
    };
    f.method = target.RenderMethod() + ": the token after the template's " +
               std::to_string(probe->tokens) + " shared tokens";
    return f;
  }
  if (target.TokenIds("A").ok()) {
    f.fn = [&target](const std::string& lead) -> Result<int64_t> {
      Result<std::vector<int64_t>> ids = target.TokenIds(lead);
      if (!ids.ok()) return ids.status();
      if (ids->empty()) return Status::Internal("the server returned no token ids");
      return ids->front();
    };
    f.method = "the lead word tokenized alone (the server renders no chat template)";
  }
  return f;
}

// The tokens every prompt of this trial shares once the server applies its chat template: what
// verify-cold may allow, measured once per trial on two of the trial's own prompts.
void MeasureTemplatePrefix(Trial& t) {
  const TrialPlan& plan = *t.s.plan;
  std::vector<const PlanRequest*> two;
  for (const auto* list : {&plan.warmup, &plan.measured}) {
    for (const auto& r : *list) {
      if (two.size() < 2) two.push_back(&r);
    }
  }
  nlohmann::json j = nlohmann::json::object();
  if (two.size() < 2) {
    j["error"] = "fewer than two prompts in the plan";
  } else {
    Result<TemplatePrefix> p =
        t.target->MeasureTemplatePrefix(two[0]->prompt.text, two[1]->prompt.text);
    j["requests"] = {two[0]->id, two[1]->id};
    if (p.ok()) {
      t.ev.template_prefix_tokens = p->tokens;
      t.ev.template_overhead_tokens = p->prompt_tokens - two[0]->prompt.message_tokens;
      j["tokens"] = p->tokens;
      j["rendered_prompt_tokens"] = p->prompt_tokens;
      j["overhead_tokens"] = *t.ev.template_overhead_tokens;
      j["method"] = p->method;
    } else {
      j["error"] = p.status().message();
    }
  }
  t.s.identity["template_prefix"] = j;
}

// The plan, calibrated with the server's own tokenizer when it has one.
PhaseEnd PlanPrompts(Trial& t) {
  const TrialOptions& opt = *t.s.opt;
  Target& target = *t.target;
  Progress(opt, "planning prompts");
  TokenCounter counter = [&target](const std::string& text) { return target.CountTokens(text); };
  const TokenCounter* counter_ptr = &counter;
  Result<int64_t> tok_check = opt.ignore_tokenize_endpoint
                                  ? Result<int64_t>(Status::Unimplemented("ignored by option"))
                                  : target.CountTokens("Hello world");
  if (!tok_check.ok()) {
    if (tok_check.status().code() != Status::Code::kUnimplemented) {
      return CouldNotRun(t.s, "tokenize: " + tok_check.status().message());
    }
    counter_ptr = nullptr;
  }
  if (counter_ptr == nullptr && t.effective.reuse()) {
    return CouldNotRun(t.s,
                       "the row declares cache reuse, whose prefixes and conversations are sized "
                       "in the server's tokens: it needs the server's tokenize endpoint");
  }
  // No two prompts may share a first token (else they share a cacheable prefix beyond the
  // template's): distinct words can, when the tokenizer splits them (a real llama.cpp server's
  // Phi-3 vocabulary cached 5 tokens, not 4, for two such prompts of one trial).
  FirstTokens first = MakeFirstTokens(target);
  PlanInputs pin;
  pin.concurrency = opt.concurrency;
  pin.trial_index = opt.trial_index;
  pin.seed = opt.seed;
  pin.phase = opt.phase;
  pin.counter = counter_ptr;
  pin.first_token = first.method.empty() ? nullptr : &first.fn;
  Result<TrialPlan> plan = MakeTrialPlan(t.effective, pin);
  if (!plan.ok()) return CouldNotRun(t.s, "planning prompts: " + plan.status().message());
  t.s.plan = std::move(*plan);
  t.s.plan->first_token_check =
      first.method.empty() ? "not checked: the server tokenizes nothing" : first.method;
  t.s.identity["first_token_check"] = {{"method", t.s.plan->first_token_check},
                                       {"skipped_leads", t.s.plan->skipped_leads}};
  MeasureTemplatePrefix(t);
  return std::nullopt;
}

PhaseEnd QuietPeriod(Trial& t) {
  const Row& row = *t.s.row;
  const TrialOptions& opt = *t.s.opt;
  if (!opt.skip_quiet_period && row.trials.quiet_period_s > 0) {
    const double wall_s = row.trials.quiet_period_s / t.scale;
    char quiet[96];
    std::snprintf(quiet, sizeof quiet, "quiet period %g s (%g s wall)", row.trials.quiet_period_s,
                  wall_s);
    Progress(opt, quiet);
    const MonoNs end = NowNs() + static_cast<MonoNs>(wall_s * 1e9);
    while (NowNs() < end && !Cancelled(opt.cancel)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    t.s.identity["quiet_period"] = {{"virtual_s", row.trials.quiet_period_s}, {"wall_s", wall_s}};
  } else {
    t.s.identity["quiet_period"] = {{"skipped", true}};
  }
  if (Cancelled(opt.cancel)) return CouldNotRun(t.s, "interrupted before any load", true);
  return std::nullopt;
}

// Where and how every request of this trial is sent (the calibration warm-ups included, so they
// stop on a broken stream too).
LoadSpec ConnectionSpec(const Trial& t) {
  const TrialOptions& opt = *t.s.opt;
  LoadSpec connection;
  connection.url = t.target->ChatUrl();
  connection.api_key = opt.api_key;
  connection.request_timeout_s = t.s.row->request_timeout_s / t.scale;
  connection.connect_timeout_s = std::min(30.0, connection.request_timeout_s);
  connection.insecure_tls = opt.insecure_tls;
  connection.cancel = opt.cancel;
  connection.evidence = t.s.evidence.get();
  connection.keep_events = false;  // they are in the evidence file and the decoded results
  const FailFastRules& rules = t.s.fail_fast;
  if (rules.enabled) {
    connection.stall_timeout_s = rules.stall_timeout_wall_s;
    connection.on_complete_check = [&rules](const RawRecord& r, const RequestResult& d) {
      std::optional<StreamBreak> b = FindStreamBreak(r, d, rules);
      return b ? std::optional<std::string>(b->Reason()) : std::nullopt;
    };
  }
  return connection;
}

// Without a tokenize endpoint the first warm-ups calibrate: w0 at the word count of its target,
// w1 at half of it; their usage.prompt_tokens give tokens per word and the template overhead,
// and every later prompt is reworded to match its target. Returns the calibration requests' load
// (nullopt when the plan needs none) or an error in words.
Result<std::optional<LoadResult>> CalibrateWordCount(Trial& t, const LoadSpec& connection) {
  TrialPlan& plan = *t.s.plan;
  if (plan.calibration != "word_count" || plan.warmup.empty()) return std::optional<LoadResult>();
  const size_t n = std::min<size_t>(2, plan.warmup.size());
  const int64_t w0 = std::max<int64_t>(1, plan.warmup[0].prompt.target_tokens);
  const int64_t w1 = std::max<int64_t>(1, w0 / 2);
  if (n == 2) RewordRequest(t.effective, plan, w1, w1, &plan.warmup[1]);
  LoadSpec cal = connection;
  for (size_t i = 0; i < n; ++i) {
    const auto& r = plan.warmup[i];
    cal.warmup.push_back({r.id, Phase::kWarmup, r.index, r.body});
  }
  cal.warmup_concurrency = 1;
  cal.concurrency = 1;
  Progress(*t.s.opt, "calibrating prompt length from usage.prompt_tokens");
  Result<LoadResult> cl = RunLoad(cal);
  if (!cl.ok()) return cl.status();
  std::vector<std::optional<int64_t>> p(n);
  for (size_t i = 0; i < n && i < cl->results.size(); ++i) p[i] = cl->results[i].prompt_tokens;
  double per_word = 0, template_tokens = 0;
  if (n == 2 && p[0] && p[1] && w0 != w1) {
    per_word = static_cast<double>(*p[0] - *p[1]) / static_cast<double>(w0 - w1);
    template_tokens = static_cast<double>(*p[0]) - per_word * static_cast<double>(w0);
  } else if (p[0]) {
    per_word = static_cast<double>(*p[0]) / static_cast<double>(w0);  // overhead unknown: 0
  }
  char note[256];
  if (per_word > 0 && std::isfinite(per_word)) {
    auto reword = [&](PlanRequest& r) {
      int64_t words = std::max<int64_t>(1, std::llround(r.prompt.target_tokens / per_word));
      RewordRequest(t.effective, plan, words, std::llround(words * per_word), &r);
    };
    for (size_t i = n; i < plan.warmup.size(); ++i) reword(plan.warmup[i]);
    for (auto& r : plan.measured) reword(r);
    std::snprintf(note, sizeof note,
                  "no tokenize endpoint: %.4f tokens per word and %.1f template tokens fitted "
                  "from the usage.prompt_tokens of %zu warm-up(s); lengths are approximate",
                  per_word, template_tokens, n);
    plan.calibration = "usage_prompt_tokens";
  } else {
    std::snprintf(note, sizeof note,
                  "no tokenize endpoint and no usage.prompt_tokens in the calibration warm-ups: "
                  "a word was taken as a token");
  }
  plan.calibration_note = note;
  // The reworded prompts are the ones sent from here on: what a killed trial leaves says so too.
  if (Status st = WritePlan(t.s); !st.ok()) return st;
  return std::optional<LoadResult>(std::move(*cl));
}

// The plan's requests after the `skip_warmups` calibration warm-ups, as the main load sends them.
LoadSpec PlannedSpec(const Trial& t, const LoadSpec& connection, size_t skip_warmups) {
  const TrialOptions& opt = *t.s.opt;
  const TrialPlan& plan = *t.s.plan;
  LoadSpec spec = connection;
  for (size_t i = skip_warmups; i < plan.warmup.size(); ++i) {
    const auto& r = plan.warmup[i];
    spec.warmup.push_back({r.id, Phase::kWarmup, r.index, r.body});
  }
  for (const auto& r : plan.measured) {
    spec.measured.push_back({r.id, Phase::kMeasured, r.index, r.body});
  }
  spec.warmup_concurrency = plan.warmup_concurrency;
  spec.concurrency = opt.concurrency;
  if (plan.open_loop()) {
    // The schedule in wall time; the connection pool sized for a busy server's queue, and a cap
    // far above any bounded queue that keeps a runaway one inside the file-descriptor limit (a
    // held-back release shows as lateness, and the trial as one that could not run).
    std::vector<MonoNs> offsets;
    offsets.reserve(plan.send_offsets_ns.size());
    for (int64_t v : plan.send_offsets_ns) {
      offsets.push_back(static_cast<MonoNs>(static_cast<double>(v) / t.scale));
    }
    spec.measured_arrivals = [offsets = std::move(offsets)] { return ScheduledArrivals(offsets); };
    spec.concurrency = kOpenLoopPoolConnections;
    spec.max_in_flight = kOpenLoopMaxInFlight;
  }
  if (plan.sessions()) {
    spec.measured_arrivals = internal::SessionArrivalFactory(t.effective, plan, t.scale);
  }
  const std::string label = LoadLabel(*t.s.row, plan.concurrency);
  if (opt.on_progress) {
    spec.on_progress = [&opt, label](const LoadProgress& p) {
      opt.on_progress(LoadLine(p, label));
    };
  }
  return spec;
}

// Fail fast stopped the calibration: the rest of the plan was never sent, by the harness's choice.
void RecordUnsent(const TrialPlan& plan, size_t skip_warmups, EvidenceWriter* evidence,
                  LoadResult* load) {
  const std::string cut = HarnessCutAfter(load->stopped_by);
  auto add = [&](const PlanRequest& p, Phase phase) {
    RawRecord r;
    r.id = p.id;
    r.phase = phase;
    r.index = p.index;
    r.cancelled = true;
    r.cancelled_by_harness = cut;
    r.transport_error = "not sent: " + cut;
    if (evidence) evidence->Append(RawRecordLine(r));
    load->results.push_back(DecodeRecord(r));
    load->records.push_back(std::move(r));
  };
  for (size_t i = skip_warmups; i < plan.warmup.size(); ++i) add(plan.warmup[i], Phase::kWarmup);
  for (const auto& p : plan.measured) add(p, Phase::kMeasured);
}

// The calibration warm-ups are warm-ups like the rest: first in the raw records.
LoadResult MergeCalibration(LoadResult calibration, LoadResult load) {
  calibration.records.insert(calibration.records.end(),
                             std::make_move_iterator(load.records.begin()),
                             std::make_move_iterator(load.records.end()));
  calibration.results.insert(calibration.results.end(),
                             std::make_move_iterator(load.results.begin()),
                             std::make_move_iterator(load.results.end()));
  if (calibration.evidence_error.empty()) calibration.evidence_error = load.evidence_error;
  calibration.recorder_wait_ns += load.recorder_wait_ns;
  calibration.measured_start_ns = load.measured_start_ns;
  calibration.end_ns = load.end_ns;
  calibration.interrupted = load.interrupted;
  calibration.stopped_by = load.stopped_by;
  calibration.stop_reason = load.stop_reason;
  return calibration;
}

// The staging directory and the raw evidence in it, opened before the first request is sent so
// that every request is on disk as it ends (raw_evidence.h). The row and plan go in first, so
// that what a killed trial leaves can be read.
Status OpenEvidence(Trial& t) {
  TrialState& s = t.s;
  Result<TrialDirWriter> dir = TrialDirWriter::Create(s.opt->out_dir);
  if (!dir.ok()) return dir.status();
  s.dir = std::move(*dir);
  CAPQ_RETURN_IF_ERROR(s.dir->Write("row.yaml", RowToYaml(*s.row)));
  CAPQ_RETURN_IF_ERROR(WritePlan(s));
  const TrialPlan& plan = *s.plan;
  const int64_t tokens = static_cast<int64_t>(plan.warmup.size() + plan.measured.size()) *
                         s.row->workload.output_tokens;
  const EvidenceCompression c = s.opt->evidence_compression.value_or(
      tokens >= kCompressEvidenceTokens ? EvidenceCompression::kZstd : EvidenceCompression::kNone);
  const std::string name = c == EvidenceCompression::kZstd ? "raw.jsonl.zst" : "raw.jsonl";
  Result<std::unique_ptr<EvidenceWriter>> w =
      EvidenceWriter::Create(s.dir->staging_dir() + "/" + name, c);
  if (!w.ok()) return w.status();
  s.evidence = std::move(*w);
  s.evidence->Append(nlohmann::json{
      {"schema", kRawSchemaV2},
      {"compression", EvidenceCompressionName(c)},
      {"planned_output_tokens",
       tokens}}.dump());
  return s.evidence->Flush();
}

// Warm-up, then the measured closed-loop burst; /metrics sampled alongside.
PhaseEnd Load(Trial& t) {
  TrialState& s = t.s;
  if (Status st = OpenEvidence(t); !st.ok()) {
    return CouldNotRun(s, "the raw evidence could not be opened: " + st.message());
  }
  s.server_metrics.push_back(Snapshot(*t.target, "before", t.t0, &t.before_text));
  // Open loop: the server's queue is a gate (stability.h), sampled often enough for each third.
  MetricsSampler sampler(s.row->identity, t.topts, s.plan->open_loop() ? 100 : 250);
  sampler.Start(t.t0);
  s.fail_fast = FailFastRulesFor(*s.row, t.effective.identity.served_model_name);
  const LoadSpec connection = ConnectionSpec(t);
  Result<std::optional<LoadResult>> calibration = CalibrateWordCount(t, connection);
  if (!calibration.ok()) {
    sampler.Stop();
    return CouldNotRun(s, "load generator: " + calibration.status().message());
  }
  std::optional<LoadResult>& cal = *calibration;
  const size_t calibration_requests = cal ? cal->records.size() : 0;
  if (cal && cal->interrupted) {
    sampler.Stop();
    s.load = std::move(*cal);
    return CouldNotRun(s, "interrupted during calibration", true);
  }
  Result<LoadResult> load = LoadResult{};
  if (cal && !cal->stopped_by.empty()) {
    RecordUnsent(*s.plan, calibration_requests, s.evidence.get(), &*cal);
    load = std::move(*cal);
  } else {
    load = RunLoad(PlannedSpec(t, connection, calibration_requests));
    if (load.ok() && cal) load = MergeCalibration(std::move(*cal), std::move(*load));
  }
  sampler.Stop();
  for (auto& l : sampler.TakeLines()) s.server_metrics.push_back(std::move(l));
  if (!load.ok()) return CouldNotRun(s, "load generator: " + load.status().message());
  s.load = std::move(*load);
  if (!s.load->evidence_error.empty()) {
    return CouldNotRun(s, "the raw evidence could not be written: " + s.load->evidence_error);
  }
  if (!s.load->stopped_by.empty()) Progress(*s.opt, s.load->stop_reason);
  s.server_metrics.push_back(Snapshot(*t.target, "after", t.t0, &t.after_text));
  return std::nullopt;
}

// Server-side cache-hit counter over the measured phase (used only where requests report none):
// the last sample before the measured burst to the snapshot after it.
// Cache-hit prompt tokens from the last /metrics sample before the measured phase to the end;
// `window_requests` says how many requests that window holds: the measured ones and every warm-up
// request still running when the base was read (its prefill may come after).
std::optional<int64_t> ServerCachedTokens(const Trial& t, int64_t* window_requests) {
  auto after = t.target->ParseCachedTokens(t.after_text);
  if (!after) return std::nullopt;
  std::optional<double> base = t.target->ParseCachedTokens(t.before_text);
  MonoNs base_ns = 0;  // the snapshot before the load
  for (const auto& l : t.s.server_metrics) {
    if (l.value("kind", "") == "sample" && l.contains("cached_tokens_total") &&
        l["t_ns"].get<MonoNs>() <= t.s.load->measured_start_ns) {
      base = l["cached_tokens_total"].get<double>();
      base_ns = l["t_ns"].get<MonoNs>();
    }
  }
  *window_requests = static_cast<int64_t>(t.s.meas.size());
  for (const RequestResult& r : t.s.warm) *window_requests += r.end_ns > base_ns ? 1 : 0;
  if (!base) return std::nullopt;
  return static_cast<int64_t>(std::llround(*after - *base));
}

// The fail-fast stop, from the record that caused it (as `capq validate` derives it).
std::optional<StreamBreak> StopOf(const TrialState& s) {
  if (s.load->stopped_by.empty()) return std::nullopt;
  const auto decoded = [&s](const std::string& id) -> const RequestResult* {
    for (const auto* phase : {&s.warm, &s.meas}) {
      for (const RequestResult& r : *phase) {
        if (r.id == id) return &r;
      }
    }
    return nullptr;
  };
  for (const RawRecord& r : s.load->records) {
    if (r.id != s.load->stopped_by) continue;
    if (const RequestResult* d = decoded(r.id)) {
      if (auto b = FindStreamBreak(r, *d, s.fail_fast)) return b;
    }
  }
  return StreamBreak{"fail_fast", s.load->stopped_by, false, s.load->stop_reason};
}

// The streams were decoded as they arrived (LoadResult::results); sorted by phase here.
void Decode(Trial& t) {
  for (RequestResult& r : t.s.load->results) {
    (r.phase == Phase::kWarmup ? t.s.warm : t.s.meas).push_back(std::move(r));
  }
  t.s.load->results.clear();
}

// The raw evidence read back in one pass, after the load: what its recorder kept of a stream was
// its facts (LoadResult::results), so each stream's chunk gaps come back from the file here, and
// the server's tokenizer re-counts each measured stream's text as its record ends in the file.
internal::ReadBackOutcome ReadBackEvidence(TrialState& s, Target& target) {
  internal::ReadBackOutcome out;
  std::unordered_map<std::string, RequestResult*> live;
  for (auto* phase : {&s.warm, &s.meas}) {
    for (RequestResult& r : *phase) live.emplace(r.id, &r);
  }
  if (Status st = s.evidence->Flush(); !st.ok()) {
    out.problem = st.message();
    return out;
  }
  size_t seen = 0;
  Result<RawEvidenceSummary> read =
      ReadRawEvidence(s.evidence->path(), [&](RawRecord&&, RequestResult&& back) {
        auto it = live.find(back.id);
        if (it == live.end()) {
          if (out.problem.empty()) out.problem = back.id + " is not one of the load's requests";
          return;
        }
        ++seen;
        internal::ReadBackRecord(std::move(back), it->second, target, &out);
      });
  if (!read.ok()) {
    out.problem = read.status().message();
  } else if (out.problem.empty() && seen != live.size()) {
    out.problem = std::to_string(live.size() - seen) + " requests have no record in it";
  }
  return out;
}

// The server's own tokenizer re-counts each measured stream's text, after the load and never on
// its timing path: usage fields alone would let an endpoint claim tokens it never streamed. The
// texts (and the chunk gaps) are read back from the raw evidence: a trial whose evidence does not
// read back as it was streamed has no result.
PhaseEnd ReadBackAndRecount(Trial& t) {
  const MonoNs start = NowNs();
  internal::ReadBackOutcome back = ReadBackEvidence(t.s, *t.target);
  if (!back.problem.empty()) {
    return CouldNotRun(t.s, "the raw evidence does not read back: " + back.problem);
  }
  t.s.recount = {{"method",
                  "the server's tokenize endpoint on each stream's text, no special "
                  "tokens"},
                 {"unavailable", back.recount_unavailable}};
  if (back.recount_unavailable.empty()) t.s.recount["counts"] = std::move(back.counts);
  // Its cost, after the timed load: the evidence read back, the texts counted.
  t.s.recount["wall_s"] = NsToS(NowNs() - start);
  t.ev.recount = t.s.recount;
  return std::nullopt;
}

// Validate, measure, decide.
void Judge(Trial& t) {
  TrialState& s = t.s;
  const Row& row = *s.row;
  t.ev.counted_as_zero = internal::ApplyCacheCounterRule(t.ev.cache_counter, &t.s.warm, &t.s.meas);
  internal::ColdPrefix cold =
      internal::EstimateColdPrefix(*s.plan, t.s.warm, t.s.meas, t.ev.template_prefix_tokens);
  t.ev.server_cached_tokens_total = ServerCachedTokens(t, &t.ev.server_cached_window_requests);
  s.identity["cold_prefix"] = internal::ColdPrefixToJson(cold);
  s.identity["cold_prefix"]["server_cached_tokens_total"] =
      t.ev.server_cached_tokens_total ? nlohmann::json(*t.ev.server_cached_tokens_total) : nullptr;
  s.identity["cold_prefix"]["server_cached_window_requests"] = t.ev.server_cached_window_requests;
  ValidationInput vin = internal::MakeValidationInput(row, *s.plan, t.s.warm, t.s.meas, cold, t.ev);
  CorrectnessReport correctness = Validate(vin);
  if (row.reuse()) {
    s.metrics_extra["reuse"] = ReuseFiguresToJson(internal::MeasureReuse(*s.plan, vin, t.scale));
  }
  internal::LatencyJudgement lat = internal::JudgeLatency(
      row, *s.plan, &t.s.meas, internal::ServerLoadSamples(s.server_metrics), t.scale);
  s.metrics = std::move(lat.metrics);
  if (lat.actual_send) {
    s.metrics_extra["latency_origin"] =
        "intended send: every latency counts from when the schedule meant the request to leave";
    s.metrics_extra["counted_from_actual_send"] = MetricsToJson(*lat.actual_send);
  }
  s.metrics_extra["time_conversion"] = t.scale == 1.0 ? "none: durations are wall time"
                                                      : "every duration is wall time x " +
                                                            std::to_string(t.scale) +
                                                            " (the simulator's virtual time)";
  s.metrics_extra["calibration"] = s.plan->calibration;
  s.metrics_extra["input_tokens_configured"] = row.workload.input_tokens;
  s.metrics_extra["cold_prefix_tokens_allowed"] = cold.allowed_tokens;
  // Wall seconds the load generator waited for its recorder (loadgen.h): reads that much late.
  s.metrics_extra["recorder_wait_s"] = NsToS(s.load->recorder_wait_ns);
  s.verdict = Decide(row, *s.metrics, correctness, StopOf(s), lat.stability);
  ApplyClassGates(row, JudgeClasses(row, *s.plan, t.s.meas, t.scale), &s.verdict);
  // The chunk gaps have been measured; nothing after reads them (results.jsonl leaves them out).
  for (auto* phase : {&s.warm, &s.meas}) {
    for (RequestResult& r : *phase) std::vector<float>().swap(r.text_gaps_ms);
  }
}

// An interrupted load or a server that went away: no verdict can be green, the records stay.
PhaseEnd CheckCompleted(Trial& t) {
  TrialState& s = t.s;
  int completed = 0;
  for (const auto& r : t.s.meas) completed += (r.http_status == 200 && !r.cancelled) ? 1 : 0;
  const std::string done = std::to_string(completed) + " of " + std::to_string(t.s.meas.size()) +
                           " measured requests completed";
  if (s.load->interrupted) {
    // The gates over a cut-short record set fail for the interruption's sake; their evidence
    // stays in verdict.json, the reason says what happened.
    s.verdict.outcome = TrialOutcome::kInterrupted;
    s.verdict.reasons = {"interrupted: " + done +
                         " before the signal; the directory is incomplete and can never pass"};
    // Nothing green: a latency figure over the requests that happened to finish is no SLO pass.
    s.verdict.latency_pass = false;
    s.ctx.complete = false;
    return Finish(s);
  }
  // A server that died mid-trial leaves transport errors; confirm with one more probe.
  bool transport_failures =
      std::any_of(t.s.meas.begin(), t.s.meas.end(), [](const RequestResult& r) {
        return r.cancelled_by_harness.empty() && (r.http_status == 0 || !r.transport_error.empty());
      });
  if (transport_failures) {
    Result<std::string> alive = t.target->Probe(NowNs() + 2'000'000'000LL, s.opt->cancel);
    if (!alive.ok()) {
      s.verdict.outcome = TrialOutcome::kCouldNotRun;
      s.verdict.reasons = {"server lost: " + alive.status().message() + "; " + done +
                           " before it went away (their records are kept)"};
      s.verdict.latency_pass = false;  // as above: nothing green in a trial that could not run
      s.ctx.complete = false;
      return Finish(s);
    }
  }
  return std::nullopt;
}

// prepare target -> plan -> quiet -> load -> judge -> seal.
TrialReport RunTrialImpl(const Row& row, const TrialOptions& opt) {
  Trial t;
  StartTrial(t, row, opt);
  for (PhaseEnd (*phase)(Trial&) : {PinIdentity, FlushAndProbe, PlanPrompts, QuietPeriod, Load}) {
    if (PhaseEnd end = phase(t)) return std::move(*end);
  }
  Decode(t);
  // The load's connections and its recorder's buffers are freed, most of them in the recorder
  // thread's arena, which the reading back on this thread does not reuse: give their pages back.
  malloc_trim(0);
  if (PhaseEnd end = ReadBackAndRecount(t)) return std::move(*end);
  Judge(t);
  if (PhaseEnd end = CheckCompleted(t)) return std::move(*end);
  t.s.ctx.complete = true;
  Progress(opt, std::string("verdict: ") + TrialOutcomeName(t.s.verdict.outcome));
  return Finish(t.s);
}

}  // namespace

namespace internal {

void ReadBackRecord(RequestResult&& back, RequestResult* live, Target& target,
                    ReadBackOutcome* out) {
  if (live->output_sha256 != back.output_sha256 || live->chunks != back.chunks) {
    if (out->problem.empty()) out->problem = back.id + " reads back other than it was streamed";
    return;
  }
  live->text_gaps_ms = std::move(back.text_gaps_ms);
  if (!out->recount_unavailable.empty() || back.phase != Phase::kMeasured) return;
  if (back.output_text.empty()) return;
  Result<int64_t> n = target.CountTokens(back.output_text);
  if (!n.ok()) {
    out->recount_unavailable = "the server's tokenizer: " + n.status().message();
    return;
  }
  out->counts[back.id] = *n;
}

}  // namespace internal

TrialReport RunTrial(const Row& row, const TrialOptions& options) {
  try {
    return RunTrialImpl(row, options);
  } catch (const std::exception& e) {
    // Nothing may escape; a trial that hit a bug says so and is never green.
    TrialReport rep;
    rep.dir = options.out_dir;
    rep.verdict.outcome = TrialOutcome::kCouldNotRun;
    rep.verdict.reasons.push_back(std::string("internal error: ") + e.what());
    return rep;
  }
}

}  // namespace capq
