#include "capq/qualify/qualify.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "capq/clock.h"
#include "capq/hash.h"
#include "capq/qualify/deciding_gate.h"
#include "capq/qualify/locate.h"
#include "capq/qualify/recommend.h"
#include "capq/qualify/tiers.h"
#include "capq/text.h"

namespace capq {

namespace {

int CountPasses(const std::vector<const TrialSummary*>& ts) {
  int n = 0;
  for (const auto* t : ts) n += t->passed();
  return n;
}

std::string SideWord(const std::vector<const TrialSummary*>& ts) {
  size_t pass = 0;
  for (const auto* t : ts) pass += t->passed();
  if (pass == ts.size()) return "pass";
  if (pass == 0) return "fail";
  return std::to_string(pass) + "/" + std::to_string(ts.size()) + " pass";
}

// The correctness gates a trial failed, each named once: "nonempty_deltas, unique_outputs".
std::string FailedGateNames(const TrialSummary& t) {
  std::string gates;
  std::vector<std::string> names;
  for (const auto& g : t.failed_gates) {
    std::string name = g.substr(0, g.find(':'));
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    if (!gates.empty()) gates += ", ";
    gates += name;
    names.push_back(std::move(name));
  }
  return gates.empty() ? "unnamed gate" : gates;
}

// The gate that decided a trial against its bound: "itl p95 55.1 ms >= 50.0 ms", or on a rate row
// the stability gate when every SLO gate was met ("queue_bounded: client in-flight ...").
std::string DecidedBy(const TrialSummary& t) {
  std::string by = DecidingGateText(t);
  return by.empty() ? "no SLO gate measured" : by;
}

// What one trial at `level` measures: "64 measured requests", "120 measured requests after a 10 s
// ramp", "300 s measured after a 10 s ramp".
std::string MeasuredText(const Row& row, int level) {
  if (!row.open_loop())
    return std::to_string(row.measured.RequestsAt(level)) + " measured requests";
  const OpenLoop& o = row.workload.open_loop;
  std::string what = o.requests ? std::to_string(*o.requests) + " measured requests"
                                : Fmt("%g", o.duration_s.value_or(0)) + " s measured";
  return what + (o.ramp_s > 0 ? " after a " + Fmt("%g", o.ramp_s) + " s ramp" : "");
}

ProbeVerdict ToProbeVerdict(const std::string& outcome) {
  if (outcome == "pass") return ProbeVerdict::kPass;
  if (outcome == "slo_fail") return ProbeVerdict::kSloFail;
  if (outcome == "correctness_fail") return ProbeVerdict::kCorrectnessFail;
  if (outcome == "interrupted") return ProbeVerdict::kInterrupted;
  return ProbeVerdict::kCouldNotRun;
}

std::string Reasons(const TrialSummary& t) {
  std::string out;
  for (const auto& r : t.reasons) {
    if (!out.empty()) out += "; ";
    out += r;
  }
  return out.empty() ? t.outcome : out;
}

class Run {
 public:
  Run(const Row& row, const TrialRunner& runner, const QualifyOptions& opt)
      : row_(row), scale_(LoadScaleOf(row)), runner_(runner), opt_(opt), t0_(NowNs()) {
    trials_ = opt.trials > 0 ? opt.trials : std::max(1, row.trials.count);
    max_per_side_ = opt.max_trials_per_side > 0 ? opt.max_trials_per_side : 2 * trials_;
    if (max_per_side_ < trials_) max_per_side_ = trials_;
    q_.row = RowInfoFromRow(row);
    q_.max_concurrency = opt.max_concurrency;
    q_.predicted_cmax = opt.predicted_cmax;
    q_.prediction_note = opt.prediction_note;
    q_.prediction_source = opt.prediction_source;
    q_.predicted_curve = opt.predicted_curve;
    q_.url = opt.url;
    q_.started_utc = FormatUtc(RealtimeAnchor::Take().unix_ns);
  }

  RowQualification Go() {
    Execute();
    Conclude();
    if (!row_.slo_tiers.empty()) QualifyFurtherTiers();
    q_.finished_utc = FormatUtc(RealtimeAnchor::Take().unix_ns);
    q_.wall_s = NsToS(NowNs() - t0_);
    return std::move(q_);
  }

 private:
  bool Cancelled() const { return opt_.cancel && opt_.cancel->load(); }

  // The primary tier's result in brief: probes, budget and the summary line.
  void Conclude() {
    for (const auto& t : q_.trials) q_.probes += t.phase == "probe";
    if (auto level = q_.proven_level()) q_.probe_budget = LocateProbeBudget(*level);
    q_.summary_line = SummaryLine(q_);
    q_.recommendation = Recommend(q_, RequalifyFields(row_));
  }

  // Each further SLO tier of the row, reusing the trials run so far (capq/qualify/tiers.h).
  void QualifyFurtherTiers() {
    BeginPhase("tiers");
    QualifyTiers(row_, runner_, opt_, t0_, &q_);
    q_.phases.back().trials = static_cast<int>(q_.tier_trials.size());
    EndPhase();
  }

  // "C=6" or "R=1.25 rps": every line below names a level this way.
  std::string L(int level) const { return scale_.Label(level); }

  void Say(const std::string& line) const {
    if (opt_.progress) opt_.progress(q_.row.id + ": " + line);
  }

  double MeanTrialWall() const {
    double sum = 0;
    int n = 0;
    for (const auto& t : q_.trials) {
      sum += t.wall_s;
      ++n;
    }
    return n ? sum / n : NAN;
  }

  std::string Eta(int remaining) const {
    double mean = MeanTrialWall();
    if (!std::isfinite(mean) || remaining <= 0) return "";
    return ", ETA " + Fmt("%.0f", std::ceil(mean * remaining)) + " s";
  }

  void BeginPhase(const std::string& name) {
    phase_start_ns_ = NowNs();
    q_.phases.push_back(PhaseCost{name, 0, 0, NsToS(phase_start_ns_ - t0_)});
  }
  void EndPhase() {
    if (q_.phases.empty()) return;
    q_.phases.back().wall_s = NsToS(NowNs() - phase_start_ns_);
  }

  const TrialSummary& RunOne(const std::string& phase, int c, int k, const std::string& move) {
    TrialRequest req{phase, c, k, TrialSeed(row_, phase, c, k)};
    MonoNs start = NowNs();
    TrialSummary t = runner_(row_, req);
    t.phase = phase;
    t.concurrency = c;
    t.rate_rps = scale_.Rate(c);
    if (t.stability_failures.empty()) t.stability_failures = StabilityFailuresOf(t.reasons);
    t.trial = k;
    t.seed = req.seed;
    t.move = move;
    t.start_offset_s = NsToS(start - t0_);
    t.wall_s = NsToS(NowNs() - start);
    if (!q_.phases.empty()) q_.phases.back().trials += 1;
    q_.trials.push_back(std::move(t));
    return q_.trials.back();
  }

  // Stops the qualification when a trial is not navigation or evidence (correctness, setup,
  // interruption). Returns true when it stopped.
  bool StopOn(const TrialSummary& t) {
    if (t.outcome == "correctness_fail") {
      q_.status = QualifyStatus::kCorrectnessFail;
      q_.failed_gate = FailedGateNames(t);
      q_.message = "correctness gate " + q_.failed_gate + " failed at " + L(t.concurrency) + " (" +
                   t.phase + " trial " + std::to_string(t.trial) + "): " + Reasons(t) +
                   " — a broken stream is not an SLO result; fix the server before qualifying";
      return true;
    }
    if (t.outcome == "interrupted" || Cancelled()) {
      q_.status = QualifyStatus::kInterrupted;
      q_.message = "interrupted during " + t.phase + " at " + L(t.concurrency);
      return true;
    }
    if (t.outcome != "pass" && t.outcome != "slo_fail") {
      q_.status = QualifyStatus::kCouldNotRun;
      q_.message = t.phase + " trial at " + L(t.concurrency) + " could not run: " + Reasons(t);
      return true;
    }
    return false;
  }

  // "slo_fail itl p95 55.1 ms >= 50.0 ms": the outcome and the gate that decided it.
  static std::string Brief(const TrialSummary& t) {
    if (t.outcome == "correctness_fail") return t.outcome + " (" + FailedGateNames(t) + ")";
    if (t.outcome != "pass" && t.outcome != "slo_fail") return t.outcome;
    return t.outcome + " " + DecidedBy(t);
  }

  void Execute() {
    // 1. Freeze. The loader refuses incomplete rows; the trial path checks identity and
    // server_expect against the running server before any load (a mismatch = could not run).
    if (row_.slo.empty()) {
      q_.status = QualifyStatus::kCouldNotRun;
      q_.message = "row has no SLO gate: nothing to qualify against";
      return;
    }

    // 2. Baseline at level 1 (C = 1, or one rate step) with the row's warm-ups.
    BeginPhase("baseline");
    Say("baseline: " + L(1) + " with " + std::to_string(row_.warmup.requests) + " warm-ups, " +
        MeasuredText(row_, 1));
    const TrialSummary& base = RunOne("baseline", 1, 1, "baseline");
    EndPhase();
    Say("baseline: " + Brief(base) + Fmt(" (%.1f s)", base.wall_s));
    if (StopOn(base)) return;
    if (!CheckBaseline(base)) return;
    if (Cancelled()) return Interrupt("baseline");
    PredictFromBaseline(base);

    // 3. Locate.
    Locator loc(Locator::Options{opt_.max_concurrency, true});
    loc.AddKnown(ProbePoint{1, ToProbeVerdict(base.outcome), base.GateRatio(), ""});
    for (const ProbePoint& p : opt_.known_points) loc.AddKnown(p);
    if (q_.predicted_cmax) {
      loc.SetPrediction(*q_.predicted_cmax);
      Say("locate: predicted " + scale_.Max() + " = " + scale_.Value(*q_.predicted_cmax) +
          (q_.prediction_note.empty() ? "" : " (" + q_.prediction_note + ")") +
          "; probing it and its neighbour first");
    }
    BeginPhase("locate");
    int probe_no = 0;
    while (auto next = loc.Next()) {
      if (Cancelled()) {
        EndPhase();
        return Interrupt("locate");
      }
      ++probe_no;
      int lo = loc.last_pass(), hi = loc.first_fail();
      int left = hi ? static_cast<int>(std::ceil(std::log2(std::max(2, hi - lo)))) : 2;
      // The locator's reason for this C, taken before recording.
      Locator probe_view = loc;
      probe_view.Record(ProbePoint{*next, ProbeVerdict::kPass, NAN, ""});
      std::string move = probe_view.moves().back();
      if (row_.open_loop()) {
        // The locator names its guess for any level; on a rate row that is Rmax, in steps.
        if (size_t at = move.find("Cmax"); at != std::string::npos) move.replace(at, 4, "Rmax");
      }
      Say("locate: probe " + std::to_string(probe_no) + " at " + L(*next) + " (" + move + ")" +
          Eta(left));
      const TrialSummary& t = RunOne("probe", *next, 1, move);
      Say("locate: " + L(*next) + " " + Brief(t) + Fmt(" (%.1f s)", t.wall_s));
      if (StopOn(t)) {
        EndPhase();
        return;
      }
      loc.Record(ProbePoint{*next, ToProbeVerdict(t.outcome), t.GateRatio(), ""});
      RefinePrediction(t, &loc);
    }
    EndPhase();
    switch (loc.state()) {
      case Locator::State::kFailsAtOne:
        q_.status = QualifyStatus::kFailsAtOne;
        q_.message = row_.open_loop() ? L(1) + " fails (" + DecidedBy(base) +
                                            "): no rate meets the row's gates, not even one step"
                                      : "C=1 misses the SLO (" + DecidedBy(base) +
                                            "): no concurrency meets it on this row";
        return;
      case Locator::State::kNoFailUpToCap:
        q_.status = QualifyStatus::kNoFailUpToCap;
        q_.operating_point = loc.last_pass();
        q_.message = "every probe up to " + L(opt_.max_concurrency) + " passed: " + scale_.Max() +
                     " >= " + scale_.Value(opt_.max_concurrency) +
                     (row_.open_loop() ? " (not a claim; raise --max-concurrency, the highest "
                                         "level in rate steps, to find the boundary)"
                                       : " (not a claim; raise --max-concurrency to find the "
                                         "boundary)");
        return;
      case Locator::State::kBoundary:
        break;
      default:
        q_.status = QualifyStatus::kCouldNotRun;
        q_.message = "locator stopped: " + loc.stop_reason();
        return;
    }
    Say("locate: adjacent pair " + L(loc.last_pass()) + " pass, " + L(loc.first_fail()) +
        " fail after " + std::to_string(loc.probes_used()) + " probes");

    // 4. Confirm.
    BeginPhase("confirm");
    Confirm(loc.last_pass());
    EndPhase();
  }

  // The latest prediction's source, curve and parameters, as the capacity data keeps them.
  void TakePrediction(const BoundaryPrediction& p) {
    q_.prediction_source = p.source;
    q_.predicted_curve = p.curve;
    q_.prediction_parameters = p.parameters;
  }

  // 2b. Without a hint, the engine model calibrated on the baseline predicts where to probe.
  void PredictFromBaseline(const TrialSummary& base) {
    if (q_.predicted_cmax || !opt_.predict_from_baseline || !base.passed()) return;
    Result<BoundaryPrediction> p = opt_.predict_from_baseline(base);
    if (!p.ok()) {
      q_.prediction_note = "no prediction from the baseline: " + p.status().message();
      Say("predict: " + q_.prediction_note);
      return;
    }
    TakePrediction(*p);
    q_.prediction_note = p->note;
    if (p->cmax) q_.predicted_cmax = std::min(*p->cmax, opt_.max_concurrency);
    from_baseline_ = true;
    Say("predict: " + p->note + " (" + p->source + ")");
  }

  // Once, on the first probe that contradicts the baseline's prediction (a fail at or below it, a
  // pass above it): the prediction refined with the decode step that probe measured under load,
  // and the locator aimed at the refined boundary.
  void RefinePrediction(const TrialSummary& probe, Locator* loc) {
    if (!from_baseline_ || refined_ || !opt_.refine_prediction || !q_.predicted_cmax ||
        probe.concurrency < 2 || !probe.has_metrics || !(probe.itl_ms.p50 > 0)) {
      return;
    }
    if (probe.passed() == (probe.concurrency <= *q_.predicted_cmax)) return;
    refined_ = true;
    const TrialSummary* base = q_.Trials("baseline", 1).front();
    Result<BoundaryPrediction> p = opt_.refine_prediction(*base, probe);
    if (!p.ok()) {
      q_.prediction_note += "; not refined: " + p.status().message();
      Say("predict: not refined — " + p.status().message());
      return;
    }
    TakePrediction(*p);
    q_.refined_cmax = p->cmax;
    q_.prediction_note += "; refined on the probe at " + L(probe.concurrency) + ": " + p->note;
    if (p->cmax) loc->SetPrediction(std::min(*p->cmax, opt_.max_concurrency));
    Say("predict: refined on the probe at " + L(probe.concurrency) + "'s ITL: " + p->note);
  }

  void Interrupt(const std::string& phase) {
    q_.status = QualifyStatus::kInterrupted;
    q_.message = "interrupted during " + phase;
  }

  bool CheckBaseline(const TrialSummary& base) {
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
    q_.message = L(1) + " baseline outside expect.baseline: " + what +
                 " — check the image, checkpoint, attention backend, graph path and speculative "
                 "settings before searching";
    return false;
  }

  // Runs trials at `c` until it has `n`, alternating with `c_up` when given.
  bool FillTo(int c, int n, int c_up, int n_up) {
    int total = 0;
    auto count = [&](int cc) { return static_cast<int>(q_.Trials("confirm", cc).size()); };
    total = std::max(0, n - count(c)) + (c_up ? std::max(0, n_up - count(c_up)) : 0);
    int done = 0;
    while (count(c) < n || (c_up && count(c_up) < n_up)) {
      for (int side : {c, c_up}) {
        if (!side) continue;
        int want = side == c ? n : n_up;
        if (count(side) >= want) continue;
        if (Cancelled()) {
          Interrupt("confirm");
          return false;
        }
        int k = count(side) + 1;
        ++done;
        Say("confirm " + std::to_string(done) + "/" + std::to_string(total) + ": " + L(side) +
            " trial " + std::to_string(k) + Eta(total - done + 1));
        const TrialSummary& t = RunOne("confirm", side, k, "");
        Say("confirm: " + L(side) + " trial " + std::to_string(k) + " " + Brief(t) +
            Fmt(" (%.1f s)", t.wall_s));
        if (StopOn(t)) return false;
      }
    }
    return true;
  }

  static int Passes(const std::vector<const TrialSummary*>& ts) { return CountPasses(ts); }

  void Confirm(int c) {
    if (!FillTo(c, trials_, c + 1, trials_)) return;
    auto low = q_.Trials("confirm", c);
    auto high = q_.Trials("confirm", c + 1);
    if (Passes(low) == static_cast<int>(low.size()) && Passes(high) == 0) {
      q_.status = QualifyStatus::kProven;
      if (row_.open_loop()) {
        q_.rmax_rps = scale_.Rate(c);
      } else {
        q_.cmax = c;
      }
      q_.operating_point = c;
      q_.message = "every " + L(c) + " trial passed and every " + L(c + 1) + " trial failed";
      return;
    }
    // Overlap: measure the noise with more trials on both sides, then never round upward.
    Say("confirm: sides overlap (" + L(c) + " " + SideWord(low) + ", " + L(c + 1) + " " +
        SideWord(high) + "); extending to " + std::to_string(max_per_side_) + " trials per side");
    if (!FillTo(c, max_per_side_, c + 1, max_per_side_)) return;
    low = q_.Trials("confirm", c);
    high = q_.Trials("confirm", c + 1);
    std::string noise = L(c) + " passed " + std::to_string(Passes(low)) + " of " +
                        std::to_string(low.size()) + " trials, " + L(c + 1) + " passed " +
                        std::to_string(Passes(high)) + " of " + std::to_string(high.size());
    int candidate = c;
    int steps = 0;
    while (true) {
      auto at = q_.Trials("confirm", candidate);
      if (!at.empty() && Passes(at) == static_cast<int>(at.size())) break;
      if (candidate <= 1 || steps >= opt_.max_steps_down) {
        q_.status = QualifyStatus::kLowered;
        q_.operating_point.reset();
        q_.message = "noisy boundary (" + noise + ") and no level down to " + L(candidate) +
                     " passed every trial: no operating point";
        return;
      }
      --candidate;
      ++steps;
      Say("confirm: moving down to " + L(candidate));
      if (!FillTo(candidate, trials_, 0, 0)) return;
    }
    q_.status = QualifyStatus::kLowered;
    q_.operating_point = candidate;
    q_.message = "noisy boundary: " + noise + ". Operating point " + L(candidate) +
                 " (every trial passed); it is not a proven " + scale_.Max() + " because " +
                 L(candidate + 1) + " did not fail every trial";
  }

  const Row& row_;
  LoadScale scale_;
  const TrialRunner& runner_;
  QualifyOptions opt_;
  MonoNs t0_;
  MonoNs phase_start_ns_ = 0;
  int trials_ = 3;
  int max_per_side_ = 6;
  RowQualification q_;
  bool from_baseline_ = false;  // the prediction came from the baseline (refinable)
  bool refined_ = false;
};

}  // namespace

uint64_t TrialSeed(const Row& row, const std::string& phase, int concurrency, int trial) {
  if (phase == "confirm" && trial >= 1 && static_cast<size_t>(trial) <= row.trials.seeds.size()) {
    return row.trials.seeds[trial - 1];
  }
  uint64_t base = Fnv1a64(row.id) ^ (row.trials.seeds.empty() ? 0 : row.trials.seeds.front());
  uint64_t x = SplitMix64(base ^ Fnv1a64(phase));
  x = SplitMix64(x ^ static_cast<uint64_t>(concurrency));
  x = SplitMix64(x ^ static_cast<uint64_t>(trial));
  // Small positive numbers read well in file names and commands.
  return x % 1000000000ULL + 1;
}

RowQualification Qualify(const Row& row, const TrialRunner& runner, const QualifyOptions& options) {
  return Run(row, runner, options).Go();
}

std::string SideText(const std::string& label, const std::vector<const TrialSummary*>& trials) {
  return label + " " + SideFigures(trials) + " " + SideWord(trials);
}

std::string SummaryLine(const RowQualification& q) {
  const std::string& id = q.row.id;
  const LoadScale scale = q.row.scale();
  auto sides = [&](int c) {
    std::string s = SideText(scale.Label(c), q.Trials("confirm", c));
    auto high = q.Trials("confirm", c + 1);
    if (!high.empty()) s += ", " + SideText(scale.Label(c + 1), high);
    return s;
  };
  // "Cmax = 4", "R = 1.00 rps": a level named as a claim or an operating point.
  auto at = [&](const std::string& name, int level) { return name + " = " + scale.Value(level); };
  switch (q.status) {
    case QualifyStatus::kProven:
      if (auto level = q.proven_level()) {
        return id + ": " + at(scale.Max(), *level) + " — " + sides(*level);
      }
      return id + ": proven, but the data has no boundary — " + q.message;
    case QualifyStatus::kLowered:
      if (q.operating_point) {
        return id + ": noisy boundary, operating point " + at(scale.Symbol(), *q.operating_point) +
               " (not a proven " + scale.Max() + ") — " + sides(*q.operating_point);
      }
      return id + ": noisy boundary, no operating point — " + q.message;
    case QualifyStatus::kNoFailUpToCap:
      return id + ": no failure up to " + at(scale.Symbol(), q.max_concurrency) + " — " +
             scale.Max() + " >= " + scale.Value(q.max_concurrency) + ", not a claim";
    case QualifyStatus::kFailsAtOne:
      return id + ": " + scale.Label(1) + (q.row.open_loop() ? " fails — " : " misses the SLO — ") +
             q.message;
    case QualifyStatus::kCorrectnessFail:
      return id + ": qualification failed — " + q.message;
    case QualifyStatus::kCouldNotRun:
      return id + ": could not run — " + q.message;
    case QualifyStatus::kBaselineMismatch:
      return id + ": baseline outside tolerance — " + q.message;
    case QualifyStatus::kInterrupted:
      return id + ": " + q.message + " (nothing proven; the trials so far are kept)";
  }
  return id + ": " + q.message;
}

std::string CostLine(const RowQualification& q) {
  std::string out;
  int total = 0;
  for (const auto& p : q.phases) {
    if (!out.empty()) out += ", ";
    std::string unit = p.name == "locate" ? (p.trials == 1 ? "probe" : "probes")
                                          : (p.trials == 1 ? "trial" : "trials");
    out +=
        p.name + " " + std::to_string(p.trials) + " " + unit + " " + Fmt("%.1f", p.wall_s) + " s";
    total += p.trials;
  }
  out += "; " + std::to_string(total) + (total == 1 ? " trial, " : " trials, ") +
         Fmt("%.1f", q.wall_s) + " s";
  if (q.proven_level() && q.probe_budget) {
    // A rate row's search runs over levels: Rmax in steps of the row's resolution.
    out += std::string(" (locate budget ceil(log2 ") + (q.row.open_loop() ? "Rmax/step" : "Cmax") +
           ")+2 = " + std::to_string(q.probe_budget) + ")";
  }
  return out;
}

Row RowWithQualification(const Row& row, const RowQualification& q, const std::string& today,
                         const std::string& capacity_data_path) {
  Row out = row;
  const LoadScale scale = LoadScaleOf(row);
  int c = q.operating_point.value_or(q.proven_level().value_or(0));
  if (row.open_loop()) {
    // The rate as the labels write it, so that 3 steps of 0.1 are written 0.3 (a multiple of the
    // step to the loader's tolerance), not 0.30000000000000004.
    out.expect.rmax_rps = std::strtod(scale.Figure(c).c_str(), nullptr);
    out.expect.cmax.reset();
  } else {
    out.expect.cmax = c;
    out.expect.rmax_rps.reset();
  }
  out.provenance.qualified_on = today;
  // The server URL is a deployment detail and never belongs in a row (row-schema.md).
  out.provenance.source = "capq qualify";
  // Per side, one clause per gate that decided its trials, with the spread against that gate's
  // bound: "C=7 itl p95 52.0-55.1 ms over 3 trials (+4.0% to +10.2% of the 50.0 ms SLO)"; on a
  // rate row a stability gate's failures with their figures: "R=1.50 rps queue_bounded client
  // in-flight 14.2 > 5.9, 13.1 > 5.1 (last third against its bound)".
  auto margin = [&](int cc) {
    auto ts = q.Trials("confirm", cc);
    if (ts.empty()) return std::string();
    SideGates side = DecideSide(ts);
    std::vector<SloCheck> gates;
    for (size_t k = 0; k < ts.size(); ++k) {
      int i = side.per_trial[k];
      if (i < 0) continue;
      const SloCheck& g = ts[k]->slo[i];
      bool seen = false;
      for (const auto& s : gates) seen = seen || SameGate(s, g);
      if (!seen) gates.push_back(g);
    }
    std::string out;
    for (const SloCheck& g : gates) {
      double lo = INFINITY, hi = -INFINITY;
      int n = 0;
      for (size_t k = 0; k < ts.size(); ++k) {
        int i = side.per_trial[k];
        if (i < 0 || !SameGate(ts[k]->slo[i], g)) continue;
        double v = ts[k]->slo[i].measured_ms;
        ++n;
        if (!std::isfinite(v)) continue;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      const std::string unit = GateUnitFor(g.below_ms).name;
      if (!std::isfinite(lo)) {
        out += (out.empty() ? "" : ", ") + GateName(g) + " not measured in " + std::to_string(n) +
               (n == 1 ? " trial" : " trials");
        continue;
      }
      out += (out.empty() ? "" : ", ") + GateName(g) + " " + GateFigure(g, lo) + "-" +
             GateFigure(g, hi) + " " + unit + " over " + std::to_string(n) +
             (n == 1 ? " trial (" : " trials (") +
             Fmt("%+.1f", 100.0 * (lo - g.below_ms) / g.below_ms) + "% to " +
             Fmt("%+.1f", 100.0 * (hi - g.below_ms) / g.below_ms) + "% of the " +
             GateFigure(g, g.below_ms) + " " + unit + " SLO)";
    }
    // One stability gate decided the side: its figures per trial; else each failure in brief.
    std::string unstable = side.stability_gate.empty() ? "" : SideFigures(ts);
    for (size_t k = 0; k < ts.size() && side.stability_gate.empty(); ++k) {
      if (!side.stability[k]) continue;
      unstable += (unstable.empty() ? "" : ", ") + StabilityBrief(*side.stability[k], ts[k]->slo);
    }
    if (!unstable.empty()) {
      out += (out.empty() ? "" : ", ") + unstable + " (last third against its bound)";
    }
    return scale.Label(cc) + " " + (out.empty() ? "no SLO gate measured" : out);
  };
  std::string notes = q.status == QualifyStatus::kProven ? "proven boundary. " : q.message + ". ";
  notes += "Margins: " + margin(c);
  std::string up = margin(c + 1);
  if (!up.empty()) notes += "; " + up;
  notes += ". Capacity data: " + capacity_data_path;
  out.provenance.notes = notes;
  return out;
}

}  // namespace capq
