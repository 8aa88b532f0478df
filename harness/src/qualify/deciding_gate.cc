#include "capq/qualify/deciding_gate.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "capq/text.h"

namespace capq {

namespace {

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

bool MissedAny(const std::vector<SloCheck>& slo) {
  for (const auto& g : slo) {
    if (!g.passed) return true;
  }
  return false;
}

double MaxRatio(const std::vector<SloCheck>& checks) {
  double r = 0;
  for (const SloCheck& g : checks) r = std::max(r, GateRatio(g));
  return r;
}

// The checks a trial is decided by: its global gates, or where those held, its nearest class's
// (TrialSummary::class_slo) when that class came nearer its bounds or missed them.
const std::vector<SloCheck>& Deciding(const TrialSummary& t) {
  if (t.class_slo.empty() || MissedAny(t.slo)) return t.slo;
  return MaxRatio(t.class_slo) > MaxRatio(t.slo) ? t.class_slo : t.slo;
}

bool MissedAny(const TrialSummary& t) { return MissedAny(Deciding(t)); }

// A trial that missed: an SLO gate failed, or a stability gate did while every SLO gate held.
bool Missed(const TrialSummary& t) {
  return MissedAny(t) || DecidingStabilityFailure(t) != nullptr;
}

std::string Sig3(double v) {
  if (!std::isfinite(v)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// The gate and subject a side is decided by: "queue_bounded client in-flight", "cache_reuse".
std::string StabilityKey(const GateMiss& m) {
  return m.subject.empty() ? m.gate : m.gate + " " + m.subject;
}

// cache_reuse's figures: the requests served outside their declared reuse and the trial's served
// and declared hit ratios, "1/126 off (63.8% of 64.5%)".
std::string ReuseFigures(const GateMiss& m, const TrialSummary& t) {
  std::string out = std::to_string(m.off);
  if (m.off > 0) out += "/" + std::to_string(m.judged);
  out += " off";
  if (t.reuse) {
    out += " (" + Sig3(100 * t.reuse->served_ratio) + "% of " +
           Sig3(100 * t.reuse->declared_ratio) + "%)";
  }
  return out;
}

// The figures of a miss: "14.2 > 5.9", "3.20 > 2.10 s" (a latency in its gate's unit), "3.1 ms";
// "n/a" when it has none.
std::string StabilityFigures(const GateMiss& m, const TrialSummary& t) {
  if (m.capacity()) return ReuseFigures(m, t);
  if (!std::isfinite(m.value)) return "n/a";
  for (const auto& g : t.slo) {
    if (GateName(g) != m.subject) continue;
    // A latency drift: the figures are milliseconds, shown in the gate's own unit.
    return GateFigure(g, m.value) + " > " + GateFigure(g, m.bound) + " " +
           GateUnitFor(g.below_ms).name;
  }
  std::string out = Sig3(m.value);
  if (std::isfinite(m.bound)) out += " > " + Sig3(m.bound);
  return m.in_ms ? out + " ms" : out;
}

}  // namespace

const GateMiss* DecidingStabilityFailure(const TrialSummary& t) {
  if (MissedAny(t) || t.misses.empty()) return nullptr;
  return &t.misses.front();
}

double StabilityRatio(const GateMiss& miss) {
  return std::isfinite(miss.value) && miss.bound > 0 ? miss.value / miss.bound : NAN;
}

std::string StabilityBrief(const GateMiss& miss, const TrialSummary& t) {
  std::string figures = StabilityFigures(miss, t);
  std::string key = StabilityKey(miss);
  return figures == "n/a" ? key : key + " " + figures;
}

std::string DecidingGateText(const TrialSummary& t) {
  if (const GateMiss* m = DecidingStabilityFailure(t)) return m->text;
  return DecidingGateText(Deciding(t));
}

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
  return FormatFixed(ms / u.div, u.decimals);
}

std::string GateValueText(const SloCheck& g) {
  std::string v = GateFigure(g, g.measured_ms);
  return GateName(g) + (g.at_least ? " >=" : "") + " " +
         (v == "n/a" ? v : v + " " + GateUnitFor(g.below_ms).name);
}

std::string GateVerdictText(const SloCheck& g) {
  if (!std::isfinite(g.measured_ms)) return GateName(g) + " not measured";
  GateUnit u = GateUnitFor(g.below_ms);
  int decimals = u.decimals;
  std::string measured = FormatFixed(g.measured_ms / u.div, decimals);
  std::string bound = FormatFixed(g.below_ms / u.div, decimals);
  // 49.97 ms against 50 ms must not read "50.0 ms < 50.0 ms".
  while (measured == bound && g.measured_ms != g.below_ms && decimals < u.decimals + 4) {
    ++decimals;
    measured = FormatFixed(g.measured_ms / u.div, decimals);
    bound = FormatFixed(g.below_ms / u.div, decimals);
  }
  // Decided early: the figure is the least the percentile could still have ended at.
  return GateName(g) + (g.at_least ? " at least " : " ") + measured + " " + u.name +
         (g.passed ? " < " : " >= ") + bound + " " + u.name;
}

int DecidingGate(const std::vector<SloCheck>& checks) {
  int failed = -1, closest = -1;
  for (size_t i = 0; i < checks.size(); ++i) {
    int& best = checks[i].passed ? closest : failed;
    if (best < 0 || Rank(checks[i]) > Rank(checks[best])) best = static_cast<int>(i);
  }
  return failed >= 0 ? failed : closest;
}

std::string DecidingGateText(const std::vector<SloCheck>& checks) {
  int i = DecidingGate(checks);
  return i < 0 ? std::string() : GateVerdictText(checks[i]);
}

std::string DecidingGateText(const TrialVerdict& v) {
  if (v.outcome != TrialOutcome::kPass && v.outcome != TrialOutcome::kSloFail) return "";
  std::vector<SloCheck> checks = SloChecksOf(v.slo);
  if (!MissedAny(checks)) {
    if (!v.misses.empty()) return v.misses.front().text;
    // A class (a mixed row's traffic class, a session row's turn) missed where all requests met.
    for (const ClassVerdict& c : v.classes) {
      for (size_t i = 0; i < c.gate_passed.size() && i < v.slo.size(); ++i) {
        if (!c.gate_passed[i]) return ClassMissText(c, i, v.slo[i].gate);
      }
    }
  }
  return DecidingGateText(checks);
}

SideGates DecideSide(const std::vector<const TrialSummary*>& trials) {
  SideGates s;
  s.per_trial.assign(trials.size(), -1);
  s.stability.assign(trials.size(), nullptr);
  // The gate every trial is shown with: on a side that met the SLO and held steady throughout, the
  // SLO gate nearest its bound in any trial; on a side with misses, the gate its misses share (if
  // they share one), an SLO gate or a stability gate.
  const SloCheck* shared = nullptr;
  std::string shared_stability;
  bool missed = false;
  for (const auto* t : trials) missed = missed || Missed(*t);
  for (const auto* t : trials) {
    if (missed && !Missed(*t)) continue;
    if (const GateMiss* m = DecidingStabilityFailure(*t)) {
      std::string key = StabilityKey(*m);
      if (!shared && shared_stability.empty()) {
        shared_stability = key;
      } else if (shared || key != shared_stability) {
        s.uniform = false;
      }
      continue;
    }
    int i = DecidingGate(Deciding(*t));
    if (i < 0) continue;
    const SloCheck& g = Deciding(*t)[i];
    if (!missed) {
      if (!shared || Rank(g) > Rank(*shared)) shared = &g;
    } else if (!shared && shared_stability.empty()) {
      shared = &g;
    } else if (!shared || !SameGate(*shared, g)) {
      s.uniform = false;
    }
  }
  if (s.uniform && !shared_stability.empty()) {
    // Each trial at that gate: its failure, or none where the gate held.
    for (size_t k = 0; k < trials.size(); ++k)
      s.stability[k] = DecidingStabilityFailure(*trials[k]);
    s.stability_gate = shared_stability;
    return s;
  }
  for (size_t k = 0; k < trials.size(); ++k) {
    const TrialSummary& t = *trials[k];
    if (s.uniform && shared) {
      s.per_trial[k] = IndexOf(Deciding(t), *shared);
    } else if (const GateMiss* m = DecidingStabilityFailure(t)) {
      s.stability[k] = m;
    } else {
      s.per_trial[k] = DecidingGate(Deciding(t));
    }
  }
  // A trial without that gate (a row edited between trials) breaks the single-gate form.
  if (s.uniform && shared) {
    for (int i : s.per_trial) s.uniform = s.uniform && i >= 0;
  }
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
      const SloCheck& c = Deciding(*trials[k])[s.per_trial[k]];
      out += (c.at_least ? ">=" : "") + GateFigure(*s.gate, c.measured_ms);
    }
    return GateName(*s.gate) + " " + out + " " + GateUnitFor(s.gate->below_ms).name;
  }
  if (!s.stability_gate.empty()) {
    for (size_t k = 0; k < trials.size(); ++k) {
      if (!out.empty()) out += ", ";
      out += s.stability[k] ? StabilityFigures(*s.stability[k], *trials[k]) : "held";
    }
    return s.stability_gate + " " + out;
  }
  for (size_t k = 0; k < trials.size(); ++k) {
    if (!out.empty()) out += " / ";
    int i = s.per_trial[k];
    if (i >= 0) {
      out += GateValueText(Deciding(*trials[k])[i]);
    } else if (s.stability[k]) {
      out += StabilityBrief(*s.stability[k], *trials[k]);
    } else {
      out += "n/a";
    }
  }
  return out;
}

}  // namespace capq
