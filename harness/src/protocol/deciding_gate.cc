#include "capq/protocol/deciding_gate.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace capq {

namespace {

std::string Fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// A ratio to compare gates by: NaN (no positive bound) ranks below every real ratio.
double Rank(const SloCheck& g) {
  double r = GateRatio(g);
  return std::isnan(r) ? -std::numeric_limits<double>::infinity() : r;
}

int IndexOf(const std::vector<SloCheck>& checks, const SloCheck& g) {
  for (size_t i = 0; i < checks.size(); ++i) {
    if (SameGate(checks[i], g)) return static_cast<int>(i);
  }
  return -1;
}

bool MissedAny(const TrialSummary& t) {
  for (const auto& g : t.slo) {
    if (!g.passed) return true;
  }
  return false;
}

}  // namespace

std::string GateName(const SloCheck& g) {
  char pct[32];
  std::snprintf(pct, sizeof pct, "%g", g.percentile);
  return g.metric + " p" + pct;
}

bool SameGate(const SloCheck& a, const SloCheck& b) {
  return a.metric == b.metric && a.percentile == b.percentile && a.below_ms == b.below_ms;
}

double GateRatio(const SloCheck& g) {
  if (!(g.below_ms > 0)) return NAN;
  if (!std::isfinite(g.measured_ms)) return INFINITY;
  return g.measured_ms / g.below_ms;
}

GateUnit GateUnitFor(double below_ms) {
  if (std::isfinite(below_ms) && below_ms < 1000) return GateUnit{1, "ms", 1};
  return GateUnit{};
}

std::string GateFigure(const SloCheck& g, double ms) {
  GateUnit u = GateUnitFor(g.below_ms);
  return Fixed(ms / u.div, u.decimals);
}

std::string GateValueText(const SloCheck& g) {
  std::string v = GateFigure(g, g.measured_ms);
  return GateName(g) + " " + (v == "n/a" ? v : v + " " + GateUnitFor(g.below_ms).name);
}

std::string GateVerdictText(const SloCheck& g) {
  if (!std::isfinite(g.measured_ms)) return GateName(g) + " not measured";
  GateUnit u = GateUnitFor(g.below_ms);
  int decimals = u.decimals;
  std::string measured = Fixed(g.measured_ms / u.div, decimals);
  std::string bound = Fixed(g.below_ms / u.div, decimals);
  // 49.97 ms against 50 ms must not read "50.0 ms < 50.0 ms".
  while (measured == bound && g.measured_ms != g.below_ms && decimals < u.decimals + 4) {
    ++decimals;
    measured = Fixed(g.measured_ms / u.div, decimals);
    bound = Fixed(g.below_ms / u.div, decimals);
  }
  return GateName(g) + " " + measured + " " + u.name + (g.passed ? " < " : " >= ") + bound + " " +
         u.name;
}

int DecidingGate(const std::vector<SloCheck>& checks) {
  int failed = -1, closest = -1;
  for (size_t i = 0; i < checks.size(); ++i) {
    int& best = checks[i].passed ? closest : failed;
    if (best < 0 || Rank(checks[i]) > Rank(checks[best])) best = static_cast<int>(i);
  }
  return failed >= 0 ? failed : closest;
}

std::vector<SloCheck> SloChecksOf(const std::vector<SloGateResult>& results) {
  std::vector<SloCheck> out;
  for (const auto& r : results) {
    out.push_back(SloCheck{SloMetricName(r.gate.metric), r.gate.percentile, r.gate.below_ms,
                           r.measured_ms, r.passed});
  }
  return out;
}

std::string DecidingGateText(const std::vector<SloCheck>& checks) {
  int i = DecidingGate(checks);
  return i < 0 ? std::string() : GateVerdictText(checks[i]);
}

std::string DecidingGateText(const TrialVerdict& v) {
  if (v.outcome != TrialOutcome::kPass && v.outcome != TrialOutcome::kSloFail) return "";
  return DecidingGateText(SloChecksOf(v.slo));
}

SideGates DecideSide(const std::vector<const TrialSummary*>& trials) {
  SideGates s;
  s.per_trial.assign(trials.size(), -1);
  // The gate every trial is shown with: on a side that met the SLO throughout, the one nearest its
  // bound in any trial; on a side with misses, the gate its misses share (if they share one).
  const SloCheck* shared = nullptr;
  bool missed = false;
  for (const auto* t : trials) missed = missed || MissedAny(*t);
  for (const auto* t : trials) {
    if (missed && !MissedAny(*t)) continue;
    int i = DecidingGate(t->slo);
    if (i < 0) continue;
    const SloCheck& g = t->slo[i];
    if (!missed) {
      if (!shared || Rank(g) > Rank(*shared)) shared = &g;
    } else if (!shared) {
      shared = &g;
    } else if (!SameGate(*shared, g)) {
      s.uniform = false;
    }
  }
  for (size_t k = 0; k < trials.size(); ++k) {
    const TrialSummary& t = *trials[k];
    s.per_trial[k] = s.uniform && shared ? IndexOf(t.slo, *shared) : DecidingGate(t.slo);
  }
  // A trial without that gate (a row edited between trials) breaks the single-gate form.
  for (int i : s.per_trial) s.uniform = s.uniform && i >= 0;
  if (s.uniform && shared) s.gate = shared;
  return s;
}

std::string SideFigures(const std::vector<const TrialSummary*>& trials) {
  if (trials.empty()) return "";
  SideGates s = DecideSide(trials);
  std::string out;
  if (s.gate) {
    for (size_t k = 0; k < trials.size(); ++k) {
      if (!out.empty()) out += "/";
      out += GateFigure(*s.gate, trials[k]->slo[s.per_trial[k]].measured_ms);
    }
    return GateName(*s.gate) + " " + out + " " + GateUnitFor(s.gate->below_ms).name;
  }
  for (size_t k = 0; k < trials.size(); ++k) {
    if (!out.empty()) out += " / ";
    int i = s.per_trial[k];
    out += i >= 0 ? GateValueText(trials[k]->slo[i]) : std::string("n/a");
  }
  return out;
}

}  // namespace capq
