// What capacity data keeps of a row's decisions: the operating recommendation with the margin it
// kept, and the row's SLO tiers side by side.
#include <optional>
#include <utility>

#include "capacity_data_internal.h"
#include "capq/record/capacity_data.h"

namespace capq {

using namespace capjson;

namespace {

json MarginToJson(const KeptMargin& m) {
  return json{{"level", m.level},
              {"at_recommended", m.at_recommended},
              {"trials", m.trials},
              {"gate", m.gate},
              {"measured_ms", Num(m.measured_ms)},
              {"below_ms", Num(m.below_ms)},
              {"headroom_pct", Num(m.headroom_pct())},
              {"text", m.text}};
}

KeptMargin MarginFromJson(const json& j) {
  KeptMargin m;
  m.level = j.at("level").get<int>();
  m.at_recommended = Get<bool>(j, "at_recommended", false);
  m.trials = Get<int>(j, "trials", 0);
  m.gate = Get<std::string>(j, "gate", "");
  m.measured_ms = GetNum(j, "measured_ms");
  m.below_ms = GetNum(j, "below_ms");
  m.text = Get<std::string>(j, "text", "");
  return m;
}

json TierTrialToJson(const TierTrial& t) {
  return json{{"phase", PhaseName(t.phase)},
              {"concurrency", t.level},
              {"trial", t.trial},
              {"outcome", TrialOutcomeName(t.outcome)},
              {"reused", t.reused}};
}

json TierToJson(const TierQualification& t) {
  auto level = [](const std::optional<int>& v) { return v ? json(*v) : json(nullptr); };
  json trials = json::array();
  for (const auto& x : t.trials) trials.push_back(TierTrialToJson(x));
  json decided = json::array();
  for (const auto* x : t.DecidedBy()) decided.push_back(TierTrialToJson(*x));
  return json{{"name", t.name},
              {"slo", GatesToJson(t.slo)},
              {"status", QualifyStatusName(t.status)},
              {"cmax", level(t.cmax)},
              {"operating_point", level(t.operating_point)},
              {"message", t.message},
              {"summary_line", t.summary_line},
              {"trials_run", t.trials_run},
              {"trials_reused", t.trials_reused},
              {"decided_by", decided},
              {"trials", trials}};
}

// "decided_by" is written for readers; it follows from "trials" and is derived again on reading.
Result<TierQualification> TierFromJson(const json& j) {
  TierQualification t;
  t.name = j.at("name").get<std::string>();
  for (const auto& g : j.at("slo")) {
    auto m = ParseSloMetric(g.at("metric").get<std::string>());
    if (!m.ok()) return m.status().WithContext(t.name + ".slo");
    t.slo.push_back(SloGate{*m, g.at("percentile").get<double>(), g.at("below_ms").get<double>()});
  }
  auto st = ParseQualifyStatus(j.at("status").get<std::string>());
  if (!st.ok()) return st.status().WithContext(t.name + ".status");
  t.status = *st;
  if (!j.at("cmax").is_null()) t.cmax = j["cmax"].get<int>();
  if (!j.at("operating_point").is_null()) t.operating_point = j["operating_point"].get<int>();
  t.message = Get<std::string>(j, "message", "");
  t.summary_line = Get<std::string>(j, "summary_line", "");
  t.trials_run = j.at("trials_run").get<int>();
  t.trials_reused = j.at("trials_reused").get<int>();
  for (const auto& x : j.at("trials")) {
    t.trials.push_back(TierTrial{PhaseAt(x, "phase"), x.at("concurrency").get<int>(),
                                 x.at("trial").get<int>(), OutcomeAt(x, "outcome"),
                                 x.at("reused").get<bool>()});
  }
  return t;
}

}  // namespace

namespace capjson {

// A rate row's levels are written beside the rates they stand for, as in "result".
json RecommendationToJson(const Recommendation& r, const LoadScale& scale) {
  json pinned = json::array();
  for (const auto& p : r.requalify_on) pinned.push_back({{"field", p.field}, {"value", p.value}});
  json j{{"level", r.level ? json(*r.level) : json(nullptr)},
         {"from_level", r.from_level},
         {"steps_down", r.steps_down},
         {"thin_margin", r.thin_margin},
         {"noisy", r.noisy},
         {"rule", r.rule},
         {"reason", r.reason},
         {"margin", r.margin ? MarginToJson(*r.margin) : json(nullptr)},
         {"requalify_on", pinned}};
  if (scale.open_loop) j["rate_rps"] = r.level ? json(scale.Rate(*r.level)) : json(nullptr);
  return j;
}

Recommendation RecommendationFromJson(const json& j) {
  Recommendation r;
  if (!j.at("level").is_null()) r.level = j["level"].get<int>();
  r.from_level = Get<int>(j, "from_level", 0);
  r.steps_down = Get<int>(j, "steps_down", 0);
  r.thin_margin = Get<bool>(j, "thin_margin", false);
  r.noisy = Get<bool>(j, "noisy", false);
  r.rule = Get<std::string>(j, "rule", "");
  r.reason = Get<std::string>(j, "reason", "");
  if (j.contains("margin") && !j["margin"].is_null()) r.margin = MarginFromJson(j["margin"]);
  for (const auto& p : j.value("requalify_on", json::array())) {
    r.requalify_on.push_back({p.at("field").get<std::string>(), p.at("value").get<std::string>()});
  }
  return r;
}

void AddTiersJson(const RowQualification& q, json* j) {
  json tiers = json::array();
  for (const auto& t : q.tiers) tiers.push_back(TierToJson(t));
  json trials = json::array();
  for (const auto& t : q.tier_trials) trials.push_back(TrialSummaryToJson(t));
  (*j)["tiers"] = tiers;
  (*j)["tier_trials"] = trials;
}

// Throws json exceptions on a wrong type (the caller catches them); a bad name is a Status.
Status TiersFromJson(const json& rj, RowQualification* q) {
  for (const auto& tj : rj.at("tiers")) {
    Result<TierQualification> t = TierFromJson(tj);
    if (!t.ok()) return t.status();
    q->tiers.push_back(std::move(*t));
  }
  for (const auto& tj : rj.value("tier_trials", json::array())) {
    q->tier_trials.push_back(TrialFromJson(tj));
  }
  return Status::Ok();
}

}  // namespace capjson

}  // namespace capq
