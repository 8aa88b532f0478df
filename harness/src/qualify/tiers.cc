// SLO tiers: how each tier judges a trial, and the order a stricter tier keeps
// (capq/qualify/tiers.h).
#include "capq/qualify/tiers.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace capq {

namespace {

bool Matches(const SloCheck& c, const SloGate& g) {
  return c.metric == SloMetricName(g.metric) && c.percentile == g.percentile &&
         c.below_ms == g.below_ms;
}

// Every gate of the tier judged and strictly below its bound, on a trial that kept its schedule.
bool TierLatencyPass(const TrialSummary& t, const std::vector<SloGate>& slo) {
  bool pass = t.misses.empty() && !slo.empty();
  for (const SloGate& g : slo) {
    const SloCheck* c = FindCheck(t, g);
    pass = pass && c && c->passed;
  }
  return pass;
}

std::string Label(const RowQualification& q, int level) { return q.row.scale().Label(level); }

}  // namespace

const SloCheck* FindCheck(const TrialSummary& t, const SloGate& gate) {
  for (const auto* list : {&t.slo, &t.tier_slo}) {
    for (const auto& c : *list) {
      if (Matches(c, gate)) return &c;
    }
  }
  return nullptr;
}

TrialOutcome TierOutcome(const TrialSummary& t, const std::vector<SloGate>& slo) {
  if (!IsSloVerdict(t.outcome)) return t.outcome;
  return t.correctness_pass && TierLatencyPass(t, slo) ? TrialOutcome::kPass
                                                       : TrialOutcome::kSloFail;
}

TrialSummary TierView(const TrialSummary& t, const std::vector<SloGate>& slo) {
  TrialSummary v = t;
  v.slo.clear();
  v.tier_slo.clear();
  for (const SloGate& g : slo) {
    const SloCheck* c = FindCheck(t, g);
    v.slo.push_back(
        c ? *c : SloCheck{SloMetricName(g.metric), g.percentile, g.below_ms, NAN, false, {}});
  }
  v.outcome = TierOutcome(t, slo);
  v.latency_pass = TierLatencyPass(t, slo);
  return v;
}

bool AtLeastAsStrict(const std::vector<SloGate>& b, const std::vector<SloGate>& a) {
  for (const SloGate& ga : a) {
    bool covered = false;
    for (const SloGate& gb : b) {
      covered = covered || (gb.metric == ga.metric && gb.percentile >= ga.percentile &&
                            gb.below_ms <= ga.below_ms);
    }
    if (!covered) return false;
  }
  return true;
}

std::vector<std::string> TierOrderViolations(const RowQualification& q) {
  std::vector<std::string> out;
  for (const auto& strict : q.tiers) {
    for (const auto& loose : q.tiers) {
      if (&strict == &loose || !AtLeastAsStrict(strict.slo, loose.slo)) continue;
      const std::optional<int> s = strict.admitted(), l = loose.admitted();
      if (!s || !l || *s <= *l) continue;
      out.push_back("tier " + strict.name + " is at least as strict as tier " + loose.name +
                    " but admits " + Label(q, *s) + " > " + Label(q, *l));
    }
  }
  return out;
}

}  // namespace capq
