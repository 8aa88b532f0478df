// What a qualification says in words (capq/qualify/qualify.h): the progress lines' pieces, the
// summary and cost lines, and the row with its new expectation and the margins behind it.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "capq/measurement/metrics.h"
#include "capq/model/row_loader.h"
#include "capq/qualify/deciding_gate.h"
#include "capq/qualify/qualify.h"
#include "capq/text.h"
#include "qualify_internal.h"

namespace capq {

namespace qualify_internal {

std::string SideWord(const std::vector<const TrialSummary*>& ts) {
  size_t pass = 0;
  for (const auto* t : ts) pass += t->passed();
  if (pass == ts.size()) return "pass";
  if (pass == 0) return "fail";
  return std::to_string(pass) + "/" + std::to_string(ts.size()) + " pass";
}

std::string FailedGateNames(const TrialSummary& t) {
  std::string gates;
  std::vector<std::string> names;
  for (const FailedGate& g : t.failed_gates) {
    if (std::find(names.begin(), names.end(), g.name) != names.end()) continue;
    if (!gates.empty()) gates += ", ";
    gates += g.name;
    names.push_back(g.name);
  }
  return gates.empty() ? "unnamed gate" : gates;
}

std::string DecidedBy(const TrialSummary& t) {
  std::string by = DecidingGateText(t);
  return by.empty() ? "no SLO gate measured" : by;
}

std::string BaselineSampleText(const Row& row) {
  if (!row.open_loop()) {
    const int n = BaselineRequests(row), full = row.measured.RequestsAt(1);
    return std::to_string(n) + " measured requests" +
           (n < full
                ? " (the single-user check; a claim at C=1 measures " + std::to_string(full) + ")"
                : "");
  }
  const OpenLoop& o = row.workload.open_loop;
  std::string what = o.requests ? std::to_string(*o.requests) + " measured requests"
                                : Fmt("%g", o.duration_s.value_or(0)) + " s measured";
  return what + (o.ramp_s > 0 ? " after a " + Fmt("%g", o.ramp_s) + " s ramp" : "");
}

std::string Reasons(const TrialSummary& t) {
  std::string out;
  for (const auto& r : t.reasons) {
    if (!out.empty()) out += "; ";
    out += r;
  }
  return out.empty() ? std::string(TrialOutcomeName(t.outcome)) : out;
}

std::string Brief(const TrialSummary& t) {
  const std::string name = TrialOutcomeName(t.outcome);
  if (t.outcome == TrialOutcome::kCorrectnessFail) return name + " (" + FailedGateNames(t) + ")";
  if (t.outcome != TrialOutcome::kPass && t.outcome != TrialOutcome::kSloFail) return name;
  return name + " " + DecidedBy(t);
}

}  // namespace qualify_internal

namespace {

// The SLO gates that decided a side's trials, each once, in the order the trials name them.
std::vector<SloCheck> DecidingGates(const std::vector<const TrialSummary*>& ts,
                                    const SideGates& side) {
  std::vector<SloCheck> gates;
  for (size_t k = 0; k < ts.size(); ++k) {
    int i = side.per_trial[k];
    if (i < 0) continue;
    const SloCheck& g = ts[k]->slo[i];
    bool seen = false;
    for (const auto& s : gates) seen = seen || SameGate(s, g);
    if (!seen) gates.push_back(g);
  }
  return gates;
}

// One deciding gate over the side's trials with the spread against its bound: "itl p95 52.0-55.1
// ms over 3 trials (+4.0% to +10.2% of the 50.0 ms SLO)", or "itl p95 not measured in 2 trials".
std::string GateSpread(const std::vector<const TrialSummary*>& ts, const SideGates& side,
                       const SloCheck& g) {
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
    return GateName(g) + " not measured in " + std::to_string(n) + (n == 1 ? " trial" : " trials");
  }
  return GateName(g) + " " + GateFigure(g, lo) + "-" + GateFigure(g, hi) + " " + unit + " over " +
         std::to_string(n) + (n == 1 ? " trial (" : " trials (") +
         Fmt("%+.1f", 100.0 * (lo - g.below_ms) / g.below_ms) + "% to " +
         Fmt("%+.1f", 100.0 * (hi - g.below_ms) / g.below_ms) + "% of the " +
         GateFigure(g, g.below_ms) + " " + unit + " SLO)";
}

// The stability gates behind a side: when one decided it, its figures per trial; else each
// trial's failure in brief. Empty when none did.
std::string Unstable(const std::vector<const TrialSummary*>& ts, const SideGates& side) {
  std::string unstable = side.stability_gate.empty() ? "" : SideFigures(ts);
  for (size_t k = 0; k < ts.size() && side.stability_gate.empty(); ++k) {
    if (!side.stability[k]) continue;
    unstable += (unstable.empty() ? "" : ", ") + StabilityBrief(*side.stability[k], *ts[k]);
  }
  return unstable;
}

// The margin of one side: one clause per gate that decided its trials, with the spread against
// that gate's bound: "C=7 itl p95 52.0-55.1 ms over 3 trials (+4.0% to +10.2% of the 50.0 ms
// SLO)"; on a rate row a stability gate's failures with their figures: "R=1.50 rps queue_bounded
// client in-flight 14.2 > 5.9, 13.1 > 5.1 (last third against its bound)". Empty without trials.
std::string Margin(const RowQualification& q, const LoadScale& scale, int cc) {
  auto ts = q.Trials(QualifyPhase::kConfirm, cc);
  if (ts.empty()) return std::string();
  SideGates side = DecideSide(ts);
  std::string out;
  for (const SloCheck& g : DecidingGates(ts, side)) {
    out += (out.empty() ? "" : ", ") + GateSpread(ts, side, g);
  }
  std::string unstable = Unstable(ts, side);
  if (!unstable.empty()) {
    out += (out.empty() ? "" : ", ") + unstable + " (last third against its bound)";
  }
  return scale.Label(cc) + " " + (out.empty() ? "no SLO gate measured" : out);
}

}  // namespace

std::string SideText(const std::string& label, const std::vector<const TrialSummary*>& trials) {
  return label + " " + SideFigures(trials) + " " + qualify_internal::SideWord(trials);
}

std::string SummaryLine(const RowQualification& q) {
  const std::string& id = q.row.id;
  const LoadScale scale = q.row.scale();
  auto sides = [&](int c) {
    std::string s = SideText(scale.Label(c), q.Trials(QualifyPhase::kConfirm, c));
    auto high = q.Trials(QualifyPhase::kConfirm, c + 1);
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
      return id + ": no failure up to " + at(scale.Symbol(), q.max_level) + " — " + scale.Max() +
             " >= " + scale.Value(q.max_level) + ", not a claim";
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

namespace {

BoundarySide SideOf(const RowQualification& q, LoadLevel level, bool pass_side) {
  BoundarySide side{level, pass_side, {}};
  const auto trials = q.Trials(QualifyPhase::kConfirm, level);
  for (size_t i = 0; i < q.row.slo.size(); ++i) {
    int64_t requests = 0, over = 0;
    for (const TrialSummary* t : trials) {
      if (i >= t->slo.size()) continue;
      requests += t->slo[i].confidence.requests;
      over += t->slo[i].confidence.over;
    }
    side.gates.push_back(ClaimConfidence(requests, over, q.row.slo[i].percentile, pass_side));
  }
  return side;
}

}  // namespace

std::vector<PredictionCheck> PredictionChecks(const RowQualification& q) {
  std::vector<PredictionCheck> out;
  for (const PredictedPoint& pt : q.predicted_curve) {
    std::vector<double> measured;
    for (const TrialSummary& t : q.trials) {
      if (t.level == pt.level && t.has_metrics && std::isfinite(t.GatingMs())) {
        measured.push_back(t.GatingMs());
      }
    }
    if (measured.empty()) continue;
    const int n = static_cast<int>(measured.size());
    const double median = Percentile(std::move(measured), 50, PercentileMethod::kLinear);
    const double error = median > 0 ? (pt.gating_ms - median) / median * 100 : NAN;
    out.push_back({pt.level, pt.gating_ms, median, n, error});
  }
  return out;
}

std::vector<BoundarySide> BoundaryConfidence(const RowQualification& q) {
  std::optional<int> level = q.proven_level();
  if (!level && q.status == QualifyStatus::kLowered) level = q.operating_point;
  if (!level || q.Trials(QualifyPhase::kConfirm, *level).empty()) return {};
  std::vector<BoundarySide> sides = {SideOf(q, *level, true)};
  if (!q.Trials(QualifyPhase::kConfirm, *level + 1).empty()) {
    sides.push_back(SideOf(q, *level + 1, false));
  }
  return sides;
}

std::string BoundaryConfidenceLine(const RowQualification& q,
                                   const std::vector<BoundarySide>& sides) {
  std::string out;
  const LoadScale scale = q.row.scale();
  for (const BoundarySide& side : sides) {
    for (size_t i = 0; i < side.gates.size() && i < q.row.slo.size(); ++i) {
      const SloGate& g = q.row.slo[i];
      const GateConfidence& c = side.gates[i];
      // The fail side claims only what failed there: a gate whose misses are no more than its
      // percentile allows makes no fail claim (the side failed on another gate).
      const double allowed = static_cast<double>(c.requests) * (1.0 - g.percentile / 100.0);
      if (!side.pass_side && !(static_cast<double>(c.over) > allowed)) continue;
      const std::string text = ConfidenceText(c);
      if (text.empty()) continue;
      out += (out.empty() ? "" : "; ") + scale.Label(side.level) + " " + SloMetricName(g.metric) +
             " p" + FormatShortest(g.percentile) + " vs " + FormatShortest(g.below_ms) +
             " ms: " + text;
    }
  }
  if (const auto& claim = q.confidence_claim) {
    out += (out.empty() ? "" : "; ") + std::string("required on the pass side ") +
           FormatShortest(claim->asked) + ": " + claim->note;
  }
  return out.empty() ? out : "confidence, each side's trials together: " + out;
}

Row RowWithQualification(const Row& row, const RowQualification& q, const std::string& today,
                         const std::string& capacity_data_path) {
  Row out = row;
  const LoadScale scale = LoadScaleOf(row);
  int c = q.operating_point.value_or(q.proven_level().value_or(0));
  if (row.open_loop()) {
    out.expect.rmax_rps = scale.RoundedRate(c);
    out.expect.cmax.reset();
  } else {
    out.expect.cmax = c;
    out.expect.rmax_rps.reset();
  }
  out.provenance.qualified_on = today;
  // The server URL is a deployment detail and never belongs in a row (row-schema.md).
  out.provenance.source = "capq qualify";
  // Per side, the margins of the gates that decided its trials (Margin).
  std::string notes = q.status == QualifyStatus::kProven ? "proven boundary. " : q.message + ". ";
  notes += "Margins: " + Margin(q, scale, c);
  std::string up = Margin(q, scale, c + 1);
  if (!up.empty()) notes += "; " + up;
  notes += ". Capacity data: " + capacity_data_path;
  out.provenance.notes = notes;
  return out;
}

}  // namespace capq
