// The contract sections of a row: its SLO gates, its further SLO tiers, and the correctness gates
// every measured request must pass.
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "row_reader_internal.h"

namespace capq::row_reader {

bool RowParser::ParseSlo(const Entry& entry, const std::string& slo_path,
                         std::vector<SloGate>* slo) {
  if (!entry.value.IsSequence() || entry.value.size() == 0) {
    return Fail(ValueMark(entry), slo_path,
                "expected a non-empty list of {metric, percentile, below_ms}, got " +
                    Describe(entry.value));
  }
  std::set<std::pair<std::string, double>> seen;
  for (size_t i = 0; i < entry.value.size(); ++i) {
    const std::string path = slo_path + "[" + std::to_string(i) + "]";
    YAML::Node item = entry.value[i];
    MapView m;
    if (!OpenMap(item, item.Mark().is_null() ? ValueMark(entry) : item.Mark(), path,
                 "an SLO gate {metric, percentile, below_ms}", &m)) {
      return false;
    }
    static const std::set<std::string> kLooseBounds = {"max",     "at_most", "le",        "lte",
                                                       "maximum", "limit",   "threshold", "target",
                                                       "bound",   "upto",    "up_to"};
    for (const auto& e : m.entries) {
      bool is_ms = e.key.size() > 3 && e.key.compare(e.key.size() - 3, 3, "_ms") == 0;
      if (e.key != "below_ms" && (is_ms || kLooseBounds.count(e.key))) {
        return Fail(e.key_mark, path + "." + e.key,
                    "SLOs are strict upper bounds: expected below_ms (a value equal to the bound "
                    "fails), got " +
                        Shown(e.key));
      }
    }
    if (!CheckKeys(m, {"metric", "percentile", "below_ms"})) return false;
    const Entry* e = nullptr;
    SloGate gate;
    std::string metric;
    if (!Required(m, "metric", "ttft, itl or e2e", &e)) return false;
    if (!GetEnum(*e, path + ".metric", {"ttft", "itl", "e2e"}, &metric)) return false;
    gate.metric = metric == "ttft"  ? SloMetric::kTtft
                  : metric == "itl" ? SloMetric::kItl
                                    : SloMetric::kE2e;
    if (!Required(m, "percentile", "a number in (0, 100)", &e)) return false;
    if (!GetNumber(*e, path + ".percentile", "a percentile strictly between 0 and 100", OpenPercent,
                   &gate.percentile)) {
      return false;
    }
    if (!Required(m, "below_ms", "the strict upper bound in ms, > 0", &e)) return false;
    if (!GetNumber(*e, path + ".below_ms", "a bound in ms > 0 (an SLO nothing can meet is no SLO)",
                   Positive, &gate.below_ms)) {
      return false;
    }
    if (!seen.insert({metric, gate.percentile}).second) {
      return Fail(m.mark, path,
                  "duplicate gate: " + metric + " p" + Num(gate.percentile) +
                      " is already gated; expected one bound per metric and percentile");
    }
    slo->push_back(gate);
  }
  return true;
}

bool RowParser::ParseSloTiers(const Entry& entry, const std::vector<SloGate>& primary,
                              std::vector<SloTier>* tiers) {
  if (!entry.value.IsSequence() || entry.value.size() == 0) {
    return Fail(ValueMark(entry), "slo_tiers",
                "expected a non-empty list of tiers {name, slo}, got " + Describe(entry.value));
  }
  std::vector<YAML::Mark> marks;
  for (size_t i = 0; i < entry.value.size(); ++i) {
    YAML::Node item = entry.value[i];
    const YAML::Mark at = item.Mark().is_null() ? ValueMark(entry) : item.Mark();
    SloTier tier;
    if (!ParseSloTier(item, at, "slo_tiers[" + std::to_string(i) + "]", &tier)) return false;
    tiers->push_back(std::move(tier));
    marks.push_back(at);
  }
  return CheckTierNames(*tiers, primary, marks);
}

bool RowParser::ParseSloTier(const YAML::Node& item, const YAML::Mark& at, const std::string& path,
                             SloTier* tier) {
  MapView m;
  if (!OpenMap(item, at, path, "an SLO tier {name, slo}", &m)) return false;
  if (!CheckKeys(m, {"name", "slo"})) return false;
  const Entry* e = nullptr;
  if (!Required(m, "name", "the tier's name, [a-z][a-z0-9_]*", &e)) return false;
  if (!e->value.IsScalar() || !IsValidId(e->value.Scalar()) || e->value.Scalar().size() > 64) {
    return Fail(ValueMark(*e), path + ".name",
                "expected a tier name matching [a-z][a-z0-9_]* (at most 64 characters), got " +
                    Describe(e->value));
  }
  tier->name = e->value.Scalar();
  if (!Required(m, "slo", "the tier's gates, a list of {metric, percentile, below_ms}", &e)) {
    return false;
  }
  return ParseSlo(*e, path + ".slo", &tier->slo);
}

// Names are unique, "primary" is the row's own slo, and no two tiers are the same contract.
bool RowParser::CheckTierNames(const std::vector<SloTier>& tiers,
                               const std::vector<SloGate>& primary,
                               const std::vector<YAML::Mark>& marks) {
  for (size_t i = 0; i < tiers.size(); ++i) {
    const std::string path = "slo_tiers[" + std::to_string(i) + "]";
    if (tiers[i].name == kPrimaryTier) {
      return Fail(marks[i], path + ".name",
                  "'primary' names the row's own slo (tier 0); expected another name");
    }
    std::string same = GateSet(tiers[i].slo) == GateSet(primary) ? kPrimaryTier : "";
    for (size_t j = 0; j < i; ++j) {
      if (tiers[j].name == tiers[i].name) {
        return Fail(marks[i], path + ".name",
                    "duplicate tier name " + Shown(tiers[i].name) + "; each tier is named once");
      }
      if (same.empty() && GateSet(tiers[j].slo) == GateSet(tiers[i].slo)) same = tiers[j].name;
    }
    if (!same.empty()) {
      return Fail(marks[i], path + ".slo",
                  "tier " + Shown(tiers[i].name) + " has the same gates as tier " + Shown(same) +
                      "; a tier is a different contract");
    }
  }
  return true;
}

// Every tier's gates need the sample their percentile needs, like the row's own slo.
bool RowParser::CheckTierSamples(const Row& row, const SampleAt& at) {
  for (size_t t = 0; t < row.slo_tiers.size(); ++t) {
    const std::vector<SloGate>& slo = row.slo_tiers[t].slo;
    for (size_t i = 0; i < slo.size(); ++i) {
      int need = MinRequestsForPercentile(slo[i].percentile);
      if (row.measured.min_requests >= need) continue;
      std::ostringstream msg;
      msg << "slo_tiers[" << t << "].slo[" << i << "] gates p" << slo[i].percentile
          << ", which needs at least " << need
          << " measured requests (ceil(100 / (100 - p)), so that one request lies above the "
             "percentile); got "
          << row.measured.min_requests;
      return Fail(at.mark, at.path, msg.str());
    }
  }
  return true;
}

bool RowParser::ParseGate(const Entry& e, const std::string& path, Gate* gate,
                          std::string* finish_value) {
  const std::string how_off =
      "a gate is switched off only with a reason: expected {enabled: false, reason: \"...\"}";
  if (e.value.IsScalar() && !IsQuoted(e.value) && e.value.Scalar() == "false") {
    return Fail(ValueMark(e), path, how_off);
  }
  if (e.value.IsScalar() && !IsQuoted(e.value) && e.value.Scalar() == "true") {
    gate->enabled = true;
    return true;
  }
  if (finish_value && e.value.IsScalar()) {
    return GetEnum(e, path, {"length", "stop"}, finish_value);
  }
  if (!e.value.IsMap()) {
    return Fail(ValueMark(e), path,
                std::string("expected true") + (finish_value ? ", length, stop" : "") +
                    " or {enabled: false, reason: \"...\"}, got " + Describe(e.value));
  }
  MapView m;
  if (!OpenMap(e, path, "a gate", &m)) return false;
  if (finish_value) {
    if (!CheckKeys(m, {"enabled", "reason", "value"})) return false;
  } else if (!CheckKeys(m, {"enabled", "reason"})) {
    return false;
  }
  const Entry* x = nullptr;
  if (!Required(m, "enabled", "true or false", &x)) return false;
  if (!GetBool(*x, path + ".enabled", &gate->enabled)) return false;
  const Entry* reason = m.Find("reason");
  if (gate->enabled) {
    if (reason) {
      return Fail(reason->key_mark, path + ".reason",
                  "a reason is given only for a gate switched off (enabled: false)");
    }
  } else {
    if (!reason) return Fail(m.missing_at, path + ".reason", how_off);
    if (!GetString(*reason, path + ".reason", &gate->reason_off)) return false;
  }
  if (finish_value && (x = m.Find("value")) &&
      !GetEnum(*x, path + ".value", {"length", "stop"}, finish_value)) {
    return false;
  }
  return true;
}

bool RowParser::ParseCorrectness(const Entry& entry, Correctness* c) {
  MapView m;
  if (!OpenMap(entry, "correctness", "the correctness gates", &m)) return false;
  if (!CheckKeys(m, {"status_200", "no_cancellations", "exact_completion_tokens", "finish_reason",
                     "nonempty_deltas", "unique_prompts", "unique_outputs", "warmup_disjoint",
                     "text_recount", "text_recount_tolerance_pct", "prompt_tokens",
                     "prompt_tokens_tolerance", "model_name", "fail_fast", "stall_timeout_s"})) {
    return false;
  }
  const std::pair<const char*, Gate*> gates[] = {
      {"status_200", &c->status_200},
      {"no_cancellations", &c->no_cancellations},
      {"exact_completion_tokens", &c->exact_completion_tokens},
      {"finish_reason", &c->finish_reason},
      {"nonempty_deltas", &c->nonempty_deltas},
      {"unique_prompts", &c->unique_prompts},
      {"unique_outputs", &c->unique_outputs},
      {"warmup_disjoint", &c->warmup_disjoint},
      {"text_recount", &c->text_recount},
      {"prompt_tokens", &c->prompt_tokens},
      {"model_name", &c->model_name},
      {"fail_fast", &c->fail_fast},
  };
  const Entry* e = nullptr;
  if ((e = m.Find("text_recount_tolerance_pct")) &&
      !GetNumber(*e, "correctness.text_recount_tolerance_pct",
                 "a percentage >= 0 (how far the server's re-count of the streamed text may be "
                 "from usage.completion_tokens)",
                 NonNegative, &c->text_recount_tolerance_pct)) {
    return false;
  }
  if ((e = m.Find("prompt_tokens_tolerance")) &&
      !GetInt(*e, "correctness.prompt_tokens_tolerance", 0, kMaxTokens,
              &c->prompt_tokens_tolerance)) {
    return false;
  }
  if ((e = m.Find("stall_timeout_s")) &&
      !GetNumber(*e, "correctness.stall_timeout_s",
                 "a number of seconds > 0 (the longest silence a stream may keep)", Positive,
                 &c->stall_timeout_s)) {
    return false;
  }
  for (const auto& [key, gate] : gates) {
    const Entry* e = m.Find(key);
    if (!e) continue;
    bool is_finish = std::string(key) == "finish_reason";
    if (!ParseGate(*e, std::string("correctness.") + key, gate,
                   is_finish ? &c->finish_reason_value : nullptr)) {
      return false;
    }
  }
  return true;
}

}  // namespace capq::row_reader
