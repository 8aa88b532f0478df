// One qualification as a program: freeze, the C = 1 baseline, locate and the hand-over to the
// confirmation (qualify_confirm.cc) and the further tiers (qualify_tiers.cc).
#include "capq/qualify/qualify.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "capq/clock.h"
#include "capq/hash.h"
#include "capq/qualify/locate.h"
#include "capq/qualify/recommend.h"
#include "capq/qualify/tiers.h"
#include "capq/text.h"
#include "qualify_internal.h"

namespace capq {

namespace qualify_internal {

namespace {

ProbeVerdict ToProbeVerdict(TrialOutcome outcome) {
  if (outcome == TrialOutcome::kPass) return ProbeVerdict::kPass;
  if (outcome == TrialOutcome::kSloFail) return ProbeVerdict::kSloFail;
  if (outcome == TrialOutcome::kCorrectnessFail) return ProbeVerdict::kCorrectnessFail;
  if (outcome == TrialOutcome::kInterrupted) return ProbeVerdict::kInterrupted;
  return ProbeVerdict::kCouldNotRun;
}

}  // namespace

Run::Run(const Row& row, const TrialRunner& runner, const QualifyOptions& opt)
    : row_(row), scale_(LoadScaleOf(row)), runner_(runner), opt_(opt), t0_(NowNs()) {
  trials_ = opt.trials > 0 ? opt.trials : std::max(1, row.trials.count);
  max_per_side_ = opt.max_trials_per_side > 0 ? opt.max_trials_per_side : 2 * trials_;
  if (max_per_side_ < trials_) max_per_side_ = trials_;
  q_.row = RowInfoFromRow(row);
  q_.max_level = opt.max_level;
  q_.predicted_cmax = opt.predicted_cmax;
  q_.prediction_note = opt.prediction_note;
  q_.prediction_source = opt.prediction_source;
  q_.predicted_curve = opt.predicted_curve;
  q_.url = opt.url;
  q_.started_utc = FormatUtc(RealtimeAnchor::Take().unix_ns);
}

RowQualification Run::Go() {
  Execute();
  Conclude();
  if (!row_.slo_tiers.empty()) QualifyFurtherTiers();
  q_.finished_utc = FormatUtc(RealtimeAnchor::Take().unix_ns);
  q_.wall_s = NsToS(NowNs() - t0_);
  return std::move(q_);
}

void Run::Conclude() {
  for (const auto& t : q_.trials) q_.probes += t.phase == QualifyPhase::kProbe;
  if (auto level = q_.proven_level()) q_.probe_budget = LocateProbeBudget(*level);
  q_.summary_line = SummaryLine(q_);
  q_.boundary_confidence = BoundaryConfidence(q_);
  q_.prediction_checks = PredictionChecks(q_);
  q_.recommendation = Recommend(q_, RequalifyFields(row_));
}

void Run::QualifyFurtherTiers() {
  BeginPhase("tiers");
  QualifyTiers(row_, runner_, opt_, t0_, &q_);
  q_.phases.back().trials = static_cast<int>(q_.tier_trials.size());
  EndPhase();
}

double Run::MeanTrialWall() const {
  double sum = 0;
  int n = 0;
  for (const auto& t : q_.trials) {
    sum += t.wall_s;
    ++n;
  }
  return n ? sum / n : NAN;
}

std::string Run::Eta(int remaining) const {
  double mean = MeanTrialWall();
  if (!std::isfinite(mean) || remaining <= 0) return "";
  return ", ETA " + Fmt("%.0f", std::ceil(mean * remaining)) + " s";
}

void Run::BeginPhase(const std::string& name) {
  phase_start_ns_ = NowNs();
  q_.phases.push_back(PhaseCost{name, 0, 0, NsToS(phase_start_ns_ - t0_)});
}

void Run::EndPhase() {
  if (q_.phases.empty()) return;
  q_.phases.back().wall_s = NsToS(NowNs() - phase_start_ns_);
}

const TrialSummary& Run::RunOne(QualifyPhase phase, int c, int k, const std::string& move) {
  TrialRequest req{phase, c, k, TrialSeed(row_, phase, c, k, opt_.corpus_salt)};
  MonoNs start = NowNs();
  TrialSummary t = runner_(row_, req);
  t.phase = phase;
  t.level = c;
  t.rate_rps = scale_.Rate(c);
  t.trial = k;
  t.seed = req.seed;
  t.move = move;
  t.start_offset_s = NsToS(start - t0_);
  t.wall_s = NsToS(NowNs() - start);
  if (!q_.phases.empty()) q_.phases.back().trials += 1;
  q_.trials.push_back(std::move(t));
  return q_.trials.back();
}

bool Run::StopOn(const TrialSummary& t) {
  if (t.outcome == TrialOutcome::kCorrectnessFail) {
    q_.status = QualifyStatus::kCorrectnessFail;
    q_.failed_gate = FailedGateNames(t);
    q_.message = "correctness gate " + q_.failed_gate + " failed at " + LevelLabel(t.level) + " (" +
                 std::string(PhaseName(t.phase)) + " trial " + std::to_string(t.trial) +
                 "): " + Reasons(t) +
                 " — a broken stream is not an SLO result; fix the server before qualifying";
    return true;
  }
  if (t.outcome == TrialOutcome::kInterrupted || Cancelled()) {
    q_.status = QualifyStatus::kInterrupted;
    q_.message =
        "interrupted during " + std::string(PhaseName(t.phase)) + " at " + LevelLabel(t.level);
    return true;
  }
  if (t.outcome != TrialOutcome::kPass && t.outcome != TrialOutcome::kSloFail) {
    q_.status = QualifyStatus::kCouldNotRun;
    q_.message = PhaseName(t.phase) + std::string(" trial at ") + LevelLabel(t.level) +
                 " could not run: " + Reasons(t);
    return true;
  }
  return false;
}

void Run::Execute() {
  // 1. Freeze. The loader refuses incomplete rows; the trial path checks identity and
  // server_expect against the running server before any load (a mismatch = could not run).
  if (row_.slo.empty()) {
    q_.status = QualifyStatus::kCouldNotRun;
    q_.message = "row has no SLO gate: nothing to qualify against";
    return;
  }
  const TrialSummary* base = RunBaseline();
  if (!base) return;
  std::optional<int> boundary = Locate(*base);
  if (!boundary) return;
  // 4. Confirm.
  BeginPhase("confirm");
  Confirm(*boundary);
  EndPhase();
}

const TrialSummary* Run::RunBaseline() {
  BeginPhase("baseline");
  Say("baseline: " + LevelLabel(1) + " with " + std::to_string(row_.warmup.requests) +
      " warm-ups, " + BaselineSampleText(row_));
  const TrialSummary& base = RunOne(QualifyPhase::kBaseline, 1, 1, "baseline");
  EndPhase();
  Say("baseline: " + Brief(base) + Fmt(" (%.1f s)", base.wall_s));
  if (StopOn(base)) return nullptr;
  if (!CheckBaseline(base)) return nullptr;
  if (Cancelled()) {
    Interrupt("baseline");
    return nullptr;
  }
  PredictFromBaseline(base);
  return &base;
}

std::optional<int> Run::Locate(const TrialSummary& base) {
  Locator loc(Locator::Options{opt_.max_level, true, scale_.Max()});
  loc.AddKnown(ProbePoint{1, ToProbeVerdict(base.outcome), base.GateRatio(), ""});
  for (const ProbePoint& p : opt_.known_points) loc.AddKnown(p);
  if (q_.predicted_cmax) {
    loc.SetPrediction(*q_.predicted_cmax);
    Say("locate: predicted " + scale_.Max() + " = " + scale_.Value(*q_.predicted_cmax) +
        (q_.prediction_note.empty() ? "" : " (" + q_.prediction_note + ")") +
        "; probing it and its neighbour first");
  }
  BeginPhase("locate");
  if (!Probe(&loc)) return std::nullopt;
  EndPhase();
  if (!AtBoundary(loc, base)) return std::nullopt;
  Say("locate: adjacent pair " + LevelLabel(loc.last_pass()) + " pass, " +
      LevelLabel(loc.first_fail()) + " fail after " + std::to_string(loc.probes_used()) +
      " probes");
  return loc.last_pass();
}

bool Run::Probe(Locator* loc) {
  int probe_no = 0;
  while (auto next = loc->Next()) {
    if (Cancelled()) {
      EndPhase();
      Interrupt("locate");
      return false;
    }
    ++probe_no;
    int lo = loc->last_pass(), hi = loc->first_fail();
    int left = hi ? static_cast<int>(std::ceil(std::log2(std::max(2, hi - lo)))) : 2;
    std::string move = ProbeMove(*loc, *next);
    Say("locate: probe " + std::to_string(probe_no) + " at " + LevelLabel(*next) + " (" + move +
        ")" + Eta(left));
    const TrialSummary& t = RunOne(QualifyPhase::kProbe, *next, 1, move);
    Say("locate: " + LevelLabel(*next) + " " + Brief(t) + Fmt(" (%.1f s)", t.wall_s));
    if (StopOn(t)) {
      EndPhase();
      return false;
    }
    loc->Record(ProbePoint{*next, ToProbeVerdict(t.outcome), t.GateRatio(), ""});
    RefinePrediction(t, loc);
  }
  return true;
}

std::string Run::ProbeMove(const Locator& loc, int next) const {
  // The locator's reason for this C, taken before recording.
  Locator probe_view = loc;
  probe_view.Record(ProbePoint{next, ProbeVerdict::kPass, NAN, ""});
  return probe_view.moves().back();
}

bool Run::AtBoundary(const Locator& loc, const TrialSummary& base) {
  switch (loc.state()) {
    case Locator::State::kFailsAtOne:
      q_.status = QualifyStatus::kFailsAtOne;
      q_.message = row_.open_loop() ? LevelLabel(1) + " fails (" + DecidedBy(base) +
                                          "): no rate meets the row's gates, not even one step"
                                    : "C=1 misses the SLO (" + DecidedBy(base) +
                                          "): no concurrency meets it on this row";
      return false;
    case Locator::State::kNoFailUpToCap:
      q_.status = QualifyStatus::kNoFailUpToCap;
      q_.operating_point = loc.last_pass();
      q_.message = "every probe up to " + LevelLabel(opt_.max_level) + " passed: " + scale_.Max() +
                   " >= " + scale_.Value(opt_.max_level) +
                   (row_.open_loop() ? " (not a claim; raise --max-concurrency, the highest "
                                       "level in rate steps, to find the boundary)"
                                     : " (not a claim; raise --max-concurrency to find the "
                                       "boundary)");
      return false;
    case Locator::State::kBoundary:
      return true;
    default:
      q_.status = QualifyStatus::kCouldNotRun;
      q_.message = "locator stopped: " + loc.stop_reason();
      return false;
  }
}

void Run::TakePrediction(const BoundaryPrediction& p) {
  q_.prediction_source = p.source;
  q_.predicted_curve = p.curve;
  q_.prediction_parameters = p.parameters;
}

void Run::PredictFromBaseline(const TrialSummary& base) {
  if (q_.predicted_cmax || !opt_.predict_from_baseline || !base.passed()) return;
  Result<BoundaryPrediction> p = opt_.predict_from_baseline(base);
  if (!p.ok()) {
    q_.prediction_note = "no prediction from the baseline: " + p.status().message();
    Say("predict: " + q_.prediction_note);
    return;
  }
  TakePrediction(*p);
  q_.prediction_note = p->note;
  if (p->cmax) q_.predicted_cmax = std::min(*p->cmax, opt_.max_level);
  from_baseline_ = true;
  Say("predict: " + p->note + " (" + p->source + ")");
}

// The evidence outranks the model: a refitted boundary below the highest pass aims at that pass
// (so its neighbour is probed next), one at or above the lowest fail just below it.
static int AimWithin(const Locator& loc, int cmax) {
  if (loc.last_pass() > 0) cmax = std::max(cmax, loc.last_pass());
  if (loc.first_fail() > 0) cmax = std::min(cmax, loc.first_fail() - 1);
  return std::max(cmax, 1);
}

void Run::RefinePrediction(const TrialSummary& probe, Locator* loc) {
  if (!from_baseline_ || !opt_.refine_prediction || !q_.predicted_cmax || probe.level < 2 ||
      !probe.has_metrics) {
    return;
  }
  std::vector<const TrialSummary*> probes;
  std::string levels;
  for (const TrialSummary& t : q_.trials) {
    if (t.phase != QualifyPhase::kProbe || t.level < 2 || !t.has_metrics) continue;
    probes.push_back(&t);
    levels += (levels.empty() ? "" : ", ") + LevelLabel(t.level);
  }
  const TrialSummary* base = q_.Trials(QualifyPhase::kBaseline, 1).front();
  Result<BoundaryPrediction> p = opt_.refine_prediction(*base, probes);
  if (!p.ok()) {
    q_.prediction_note +=
        "; not refitted on " + LevelLabel(probe.level) + ": " + p.status().message();
    Say("predict: not refitted — " + p.status().message());
    return;
  }
  TakePrediction(*p);
  q_.refined_cmax = p->cmax;
  const std::string on = "refitted on the probes at " + levels;
  q_.prediction_note +=
      "; " + on + ": " +
      (p->cmax ? scale_.Max() + " " + scale_.Value(*p->cmax) : std::string("no boundary"));
  if (p->cmax) loc->SetPrediction(AimWithin(*loc, std::min(*p->cmax, opt_.max_level)));
  Say("predict: " + on + " (TTFT and ITL): " + p->note);
}

void Run::Interrupt(const std::string& phase) {
  q_.status = QualifyStatus::kInterrupted;
  q_.message = "interrupted during " + phase;
}

bool Run::CheckBaseline(const TrialSummary& base) {
  BaselineCheck& b = q_.baseline;
  b.ttft_p50_ms = base.ttft_ms.p50;
  b.itl_p50_ms = base.itl_ms.p50;
  if (!row_.expect.baseline) return true;
  const Baseline& e = *row_.expect.baseline;
  b.checked = true;
  b.tolerance_pct = e.tolerance_pct;
  b.expected_ttft_p50_ms = e.ttft_p50_ms;
  b.expected_itl_p50_ms = e.itl_p50_ms;
  std::vector<std::string> off;
  auto check = [&](const char* name, const std::optional<double>& want, double got) {
    if (!want) return;
    double dev = *want != 0 ? 100.0 * (got - *want) / *want : NAN;
    std::string line = std::string(name) + " " + Fmt("%.3f", got) + " ms vs expected " +
                       Fmt("%.3f", *want) + " ms (" + Fmt("%+.1f", dev) + "%, tolerance ±" +
                       Fmt("%g", e.tolerance_pct) + "%)";
    if (!std::isfinite(dev) || std::fabs(dev) > e.tolerance_pct) off.push_back(line);
    if (!b.message.empty()) b.message += "; ";
    b.message += line;
  };
  check("TTFT p50", e.ttft_p50_ms, base.ttft_ms.p50);
  check("ITL p50", e.itl_p50_ms, base.itl_ms.p50);
  b.within = off.empty();
  if (b.within) {
    Say("baseline: within tolerance — " + b.message);
    return true;
  }
  q_.status = QualifyStatus::kBaselineMismatch;
  std::string what;
  for (const auto& o : off) what += (what.empty() ? "" : "; ") + o;
  q_.message = LevelLabel(1) + " baseline outside expect.baseline: " + what +
               " — check the image, checkpoint, attention backend, graph path and speculative "
               "settings before searching";
  return false;
}

}  // namespace qualify_internal

namespace {

uint64_t UnsaltedSeed(const Row& row, QualifyPhase phase, LoadLevel level, int trial) {
  if (phase == QualifyPhase::kConfirm && trial >= 1 &&
      static_cast<size_t>(trial) <= row.trials.seeds.size()) {
    return row.trials.seeds[trial - 1];
  }
  uint64_t base = Fnv1a64(row.id) ^ (row.trials.seeds.empty() ? 0 : row.trials.seeds.front());
  uint64_t x = SplitMix64(base ^ Fnv1a64(PhaseName(phase)));
  x = SplitMix64(x ^ static_cast<uint64_t>(level));
  x = SplitMix64(x ^ static_cast<uint64_t>(trial));
  // Small positive numbers read well in file names and commands.
  return x % 1000000000ULL + 1;
}

}  // namespace

uint64_t TrialSeed(const Row& row, QualifyPhase phase, LoadLevel level, int trial, uint64_t salt) {
  const uint64_t seed = UnsaltedSeed(row, phase, level, trial);
  if (salt == 0) return seed;
  return SplitMix64(seed ^ SplitMix64(salt)) % 1000000000ULL + 1;
}

RowQualification Qualify(const Row& row, const TrialRunner& runner, const QualifyOptions& options) {
  return qualify_internal::Run(row, runner, options).Go();
}

}  // namespace capq
