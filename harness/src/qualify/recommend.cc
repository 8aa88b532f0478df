#include "capq/qualify/recommend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "capq/model/prompts.h"
#include "capq/qualify/deciding_gate.h"
#include "capq/text.h"

namespace capq {

namespace {

void Pin(std::vector<PinnedField>* out, const std::string& field, const std::string& value) {
  if (!value.empty()) out->push_back(PinnedField{field, value});
}

void PinIdentity(std::vector<PinnedField>* out, const RowInfo& r) {
  Pin(out, "identity.engine", r.engine);
  Pin(out, "identity.image", r.image);
  Pin(out, "identity.model", r.model);
  Pin(out, "identity.model_revision", r.model_revision);
  Pin(out, "identity.hardware", r.hardware);
  Pin(out, "identity.driver", r.driver);
}

// "p95 ttft < 10000 ms and p95 itl < 50 ms"
std::string SloText(const std::vector<SloGate>& slo) {
  std::string out;
  for (const auto& g : slo) {
    if (!out.empty()) out += " and ";
    out += "p" + Fmt("%g", g.percentile) + " " + SloMetricName(g.metric) + " < " +
           Fmt("%g", g.below_ms) + " ms";
  }
  return out;
}

void PinContract(std::vector<PinnedField>* out, const RowInfo& r) {
  Pin(out, "slo", SloText(r.slo));
  Pin(out, "percentile_method", r.percentile_method);
}

std::string SamplingText(const Sampling& s) {
  return "temperature " + Fmt("%g", s.temperature) + ", ignore_eos " +
         (s.ignore_eos ? "true" : "false") + (s.top_p ? ", top_p " + Fmt("%g", *s.top_p) : "");
}

std::string ArrivalText(const Workload& w) {
  if (w.arrival_kind != ArrivalKind::kGamma) return ArrivalKindName(w.arrival_kind);
  return std::string(ArrivalKindName(w.arrival_kind)) + ", cv " + Fmt("%g", w.open_loop.cv);
}

void PinWorkload(std::vector<PinnedField>* out, const Row& row) {
  const Workload& w = row.workload;
  Pin(out, "workload.input_tokens", std::to_string(w.input_tokens));
  Pin(out, "workload.input_stddev_tokens", std::to_string(w.input_stddev_tokens));
  Pin(out, "workload.output_tokens", std::to_string(w.output_tokens));
  Pin(out, "workload.output_stddev_tokens", std::to_string(w.output_stddev_tokens));
  Pin(out, "workload.sampling", SamplingText(w.sampling));
  Pin(out, "workload.arrival", ArrivalText(w));
  Pin(out, "workload.prompt_corpus", w.prompt_corpus);
  Pin(out, "cache.prefix_cache", row.cache.prefix_cache ? "enabled" : "disabled");
  Pin(out, "cache.flush_before_trial", row.cache.flush_before_trial ? "true" : "false");
  Pin(out, "cache.verify_cold", row.cache.verify_cold ? "true" : "false");
}

// A mixed row's traffic (its samples' digest, so an edited file requalifies) and classes.
void PinMix(std::vector<PinnedField>* out, const Mix& mix) {
  std::string lines, classes;
  for (const MixClass& c : mix.classes) {
    for (const TrafficSample& s : c.samples) lines += TrafficSampleToJsonLine(s) + "\n";
    classes += (classes.empty() ? "" : ", ") + c.name + " " + std::to_string(c.share);
  }
  Pin(out, "mix.traffic", mix.traffic + " (samples sha256 " + TextSha256Hex(lines) + ")");
  Pin(out, "mix.classes", classes);
}

// Every trial of any phase at `level`.
std::vector<const TrialSummary*> TrialsAt(const RowQualification& q, int level) {
  std::vector<const TrialSummary*> out;
  for (const auto& t : q.trials) {
    if (t.level == level) out.push_back(&t);
  }
  return out;
}

// The gate nearest its bound over `trials` (highest measured / bound), and how many trials
// measured one; trials == 0 when none did.
KeptMargin WorstGate(const std::vector<const TrialSummary*>& trials, int level) {
  KeptMargin m;
  m.level = level;
  const SloCheck* worst = nullptr;
  for (const auto* t : trials) {
    bool measured = false;
    for (const auto& g : t->slo) {
      double r = GateRatio(g);
      if (!std::isfinite(r)) continue;
      measured = true;
      if (!worst || r > GateRatio(*worst)) worst = &g;
    }
    m.trials += measured;
  }
  if (!worst) return m;
  m.gate = GateName(*worst);
  m.measured_ms = worst->measured_ms;
  m.below_ms = worst->below_ms;
  return m;
}

// "39% headroom", with a decimal under 10% ("6.9% headroom"); "over its bound by 3.0%" when the
// worst trial missed it.
std::string HeadroomText(double pct) {
  if (pct < 0) return "over its bound by " + Fmt("%.1f%%", -pct);
  return Fmt(pct < 10 ? "%.1f%%" : "%.0f%%", pct) + " headroom";
}

// "ttft p95 6.10 s vs 10.00 s"
std::string GateVs(const KeptMargin& m) {
  SloCheck g{"", 0, m.below_ms, m.measured_ms, false, {}};
  std::string unit = " " + GateUnitFor(m.below_ms).name;
  return m.gate + " " + GateFigure(g, m.measured_ms) + unit + " vs " + GateFigure(g, m.below_ms) +
         unit;
}

// "ttft p95 6.10 s vs 10.00 s at C=6: 39% headroom (worst of 2 trials)"
std::string MarginText(const KeptMargin& m, const LoadScale& scale) {
  return GateVs(m) + " at " + scale.Label(m.level) + ": " + HeadroomText(m.headroom_pct()) +
         " (worst of " + std::to_string(m.trials) + (m.trials == 1 ? " trial)" : " trials)");
}

std::optional<KeptMargin> MarginKept(const RowQualification& q, int level, int from) {
  const LoadScale scale = q.row.scale();
  KeptMargin at = WorstGate(TrialsAt(q, level), level);
  if (at.trials > 0) {
    at.at_recommended = true;
    at.text = MarginText(at, scale);
    return at;
  }
  KeptMargin base = WorstGate(q.Trials(QualifyPhase::kConfirm, from), from);
  if (base.trials == 0) return std::nullopt;
  base.text =
      "not measured at " + scale.Label(level) + " (no trial ran there); " + MarginText(base, scale);
  return base;
}

// Whether the worst confirmation trial at `from` is within the thin fraction of a bound, and the
// sentence that says so.
bool ThinMargin(const RowQualification& q, int from, const RecommendPolicy& p, std::string* why) {
  const LoadScale scale = q.row.scale();
  KeptMargin m = WorstGate(q.Trials(QualifyPhase::kConfirm, from), from);
  std::string pct = Fmt("%g%%", 100 * p.thin_margin_fraction);
  if (m.trials == 0) {
    *why = "no gate was measured in the " + scale.Label(from) +
           " confirmation trials, so the margin is unknown and counts as thin";
    return true;
  }
  bool thin = m.measured_ms / m.below_ms > 1 - p.thin_margin_fraction;
  *why = "the " + scale.Label(from) + " confirmation trials keep " +
         (thin ? "less than " : "at least ") + pct + " headroom (worst " + GateVs(m) + ": " +
         Fmt("%.1f%%", m.headroom_pct()) + ")";
  return thin;
}

int Passes(const std::vector<const TrialSummary*>& ts) {
  int n = 0;
  for (const auto* t : ts) n += t->passed();
  return n;
}

// Whether the boundary was noisy, and the confirmation counts that show it: on a lowered result
// every level above its operating point ("C=5 passed 1 of 6"), else a side that broke the rule.
bool Noisy(const RowQualification& q, int from, std::string* why) {
  const bool lowered = q.status == QualifyStatus::kLowered;
  std::set<int> levels;
  for (const auto& t : q.trials) {
    if (t.phase == QualifyPhase::kConfirm && t.level >= from) levels.insert(t.level);
  }
  std::string counts;
  for (int level : levels) {
    auto ts = q.Trials(QualifyPhase::kConfirm, level);
    int pass = Passes(ts);
    bool broke = level == from ? pass < static_cast<int>(ts.size()) : pass > 0;
    bool shown = lowered ? level > from : broke && level <= from + 1;
    if (!shown) continue;
    counts += (counts.empty() ? "" : ", ") + q.row.scale().Label(level) + " passed " +
              std::to_string(pass) + " of " + std::to_string(ts.size());
  }
  bool noisy = lowered || !counts.empty();
  if (noisy) *why = "the boundary was noisy" + (counts.empty() ? "" : " (" + counts + ")");
  return noisy;
}

std::string StepsWord(int n) {
  static const char* const kWords[] = {"no step", "one step", "two steps", "three steps"};
  return n >= 0 && n < 4 ? kWords[n] : std::to_string(n) + " steps";
}

int Steps(const Recommendation& r, const RecommendPolicy& p) {
  return p.default_steps + (r.thin_margin ? p.thin_steps : 0) + (r.noisy ? p.noisy_steps : 0);
}

// "two steps below the proven Cmax (1 default + 1 thin margin)"
std::string RuleText(const RowQualification& q, const Recommendation& r, const RecommendPolicy& p) {
  const LoadScale scale = q.row.scale();
  int steps = Steps(r, p);
  std::string causes = std::to_string(p.default_steps) + " default";
  if (r.thin_margin) causes += " + " + std::to_string(p.thin_steps) + " thin margin";
  if (r.noisy) causes += " + " + std::to_string(p.noisy_steps) + " noisy boundary";
  std::string base = q.status == QualifyStatus::kProven ? "the proven " + scale.Max()
                                                        : "the lowered operating point";
  std::string rule = StepsWord(steps) + " below " + base + " (" + causes + ")";
  if (r.steps_down < steps) {
    rule += "; held at " + scale.Label(1) + ", the lowest level, so it keeps " +
            StepsWord(r.steps_down);
  }
  return rule;
}

// Why there is nothing to step down from.
std::string NoRecommendation(const RowQualification& q) {
  const LoadScale scale = q.row.scale();
  const std::string none = "no proven " + scale.Max() + ": ";
  switch (q.status) {
    case QualifyStatus::kLowered:
      return "no operating point: the boundary was noisy and no level below it passed every trial";
    case QualifyStatus::kNoFailUpToCap:
      return none + "every probe up to " + scale.Label(q.max_level) + " passed, so " + scale.Max() +
             " >= " + scale.Value(q.max_level) +
             " is not a claim to step "
             "down from";
    case QualifyStatus::kFailsAtOne:
      return none + scale.Label(1) + " misses the row's gates: there is no level to operate at";
    case QualifyStatus::kCorrectnessFail:
      return none + "correctness gate " + q.failed_gate + " failed; fix the server first";
    default:
      return none + "the qualification ended " + QualifyStatusName(q.status);
  }
}

std::optional<int> FromLevel(const RowQualification& q) {
  if (q.status == QualifyStatus::kProven) return q.proven_level();
  if (q.status == QualifyStatus::kLowered) return q.operating_point;
  return std::nullopt;
}

}  // namespace

std::vector<PinnedField> RequalifyFields(const Row& row) {
  RowInfo info = RowInfoFromRow(row);
  std::vector<PinnedField> out;
  PinIdentity(&out, info);
  for (const auto& [key, value] : row.identity.server_expect) {
    Pin(&out, "identity.server_expect." + key, value);
  }
  Pin(&out, "identity.sim_profile", row.identity.sim_profile);
  PinWorkload(&out, row);
  if (row.mix) PinMix(&out, *row.mix);
  PinContract(&out, info);
  return out;
}

std::vector<PinnedField> RequalifyFields(const RowInfo& row) {
  std::vector<PinnedField> out;
  PinIdentity(&out, row);
  Pin(&out, "identity.sim_profile", row.sim_profile);
  Pin(&out, "workload.input_tokens", std::to_string(row.input_tokens));
  Pin(&out, "workload.output_tokens", std::to_string(row.output_tokens));
  Pin(&out, "workload.arrival", ArrivalKindName(row.arrival));
  PinContract(&out, row);
  return out;
}

Recommendation Recommend(const RowQualification& q, const std::vector<PinnedField>& requalify_on,
                         const RecommendPolicy& policy) {
  Recommendation r;
  r.requalify_on = requalify_on;
  std::optional<int> from = FromLevel(q);
  if (!from || *from < 1) {
    r.reason = NoRecommendation(q);
    return r;
  }
  std::string thin_why, noisy_why;
  r.from_level = *from;
  r.thin_margin = ThinMargin(q, *from, policy, &thin_why);
  r.noisy = Noisy(q, *from, &noisy_why);
  r.level = std::max(1, *from - Steps(r, policy));
  r.steps_down = *from - *r.level;
  r.rule = RuleText(q, r, policy);
  r.reason = thin_why + (noisy_why.empty() ? "" : "; " + noisy_why);
  r.margin = MarginKept(q, *r.level, *from);
  return r;
}

std::string RecommendationLine(const RowQualification& q) {
  const Recommendation& r = q.recommendation;
  std::string line = "policy (not the benchmark answer): ";
  if (!r.level) return line + "no recommended operating limit — " + r.reason;
  line += "operate at " + q.row.scale().Label(*r.level) + " — " + r.rule;
  if (r.margin) line += "; margin kept: " + r.margin->text;
  if (!r.requalify_on.empty()) {
    line += "; requalify when any of " + std::to_string(r.requalify_on.size()) +
            " pinned fields changes (capacity data)";
  }
  return line;
}

void RecommendWhereNotRecorded(CapacityData* data) {
  for (RowQualification& q : data->rows) {
    if (q.recommendation_recorded) continue;
    q.recommendation = Recommend(q, RequalifyFields(q.row));
    q.recommendation_recorded = true;
  }
}

}  // namespace capq
