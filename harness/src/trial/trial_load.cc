// A trial's load: the raw evidence opened, the word-count calibration where the server tokenizes
// nothing, the warm-up and the measured requests sent, /metrics sampled alongside.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <thread>

#include "capq/clock.h"
#include "capq/measurement/decode.h"
#include "capq/measurement/fail_fast.h"
#include "capq/measurement/loadgen.h"
#include "capq/measurement/raw_evidence.h"
#include "capq/model/plan.h"
#include "capq/model/row_loader.h"
#include "capq/record/artifacts.h"
#include "capq/targets/target.h"
#include "trial_internal.h"

namespace capq::internal {
namespace {

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
  connection.early_decision = t.s.early_decision;
  connection.loops = opt.loops;
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
  spec.concurrency = opt.level;  // closed loop: C at once; sessions: C open; unused by a rate
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
    spec.connections = kOpenLoopPoolConnections;
    spec.max_in_flight = kOpenLoopMaxInFlight;
  }
  if (plan.sessions()) {
    spec.measured_arrivals = internal::SessionArrivalFactory(t.effective, plan, t.scale);
  }
  const std::string label = LoadLabel(*t.s.row, plan.level);
  if (opt.on_load_progress) {
    spec.on_progress = [&opt, label](const LoadProgress& p) {
      opt.on_load_progress(LoadLine(p, label));
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
  calibration.loops = std::move(load.loops);
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

}  // namespace

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
  s.early_decision = EarlyDecisionRulesFor(*s.row, s.plan->level, s.opt->full_trials);
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
  if (s.load->loops.size() > 1) {
    for (const std::string& line : LoopFigureLines(s.load->loops)) Progress(*s.opt, line);
  }
  if (!s.load->evidence_error.empty()) {
    return CouldNotRun(s, "the raw evidence could not be written: " + s.load->evidence_error);
  }
  if (!s.load->stopped_by.empty()) Progress(*s.opt, s.load->stop_reason);
  if (s.load->decided) Progress(*s.opt, s.load->decided->Reason());
  s.server_metrics.push_back(Snapshot(*t.target, "after", t.t0, &t.after_text));
  return std::nullopt;
}

}  // namespace capq::internal
