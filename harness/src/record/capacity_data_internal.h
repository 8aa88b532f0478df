// What the codecs of capacity data share: the number and field readers every codec uses, and
// the codecs one part of the data lends another (a trial inside a row, a row's tiers).
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "capq/record/capacity_data.h"
#include "capq/status.h"

namespace capq::capjson {

using nlohmann::json;

inline json Num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// A number or NaN; throws json::type_error for a value of the wrong type (caught by the caller).
inline double GetNum(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return NAN;
  if (!it->is_number()) {
    throw json::type_error::create(302, std::string("key '") + key + "' must be a number", &j);
  }
  return it->get<double>();
}

// A trial outcome by its name (TrialOutcomeName); throws json::other_error naming an unknown one.
inline TrialOutcome OutcomeAt(const json& j, const char* key) {
  const std::string name = j.at(key).get<std::string>();
  Result<TrialOutcome> o = ParseTrialOutcome(name);
  if (!o.ok()) {
    const std::string what = std::string("key '") + key + "': " + o.status().message();
    throw json::other_error::create(501, what, &j);
  }
  return *o;
}

// A qualification phase by its name (PhaseName); throws json::other_error naming any other text.
inline QualifyPhase PhaseAt(const json& j, const char* key) {
  const std::string name = j.at(key).get<std::string>();
  std::optional<QualifyPhase> p = ParsePhase(name);
  if (!p) {
    const std::string what =
        std::string("key '") + key + "': '" + name + "' is not baseline, probe or confirm";
    throw json::other_error::create(501, what, &j);
  }
  return *p;
}

template <typename T>
T Get(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<T>();
}

// A trial's checks and figures (trial_summary.cc).
json ChecksToJson(const std::vector<SloCheck>& checks);
std::vector<SloCheck> ChecksFromJson(const json& a);
TrialSummary TrialFromJson(const json& j);

// A row's SLO gates (capacity_data_json.cc).
Result<SloMetric> ParseSloMetric(const std::string& s);
json GatesToJson(const std::vector<SloGate>& gates);

// A row's recommendation and tiers (capacity_decisions_json.cc).
json RecommendationToJson(const Recommendation& r, const LoadScale& scale);
Recommendation RecommendationFromJson(const json& j);
void AddTiersJson(const RowQualification& q, json* j);
// Throws json exceptions on a wrong type (the caller catches them); a bad name is a Status.
Status TiersFromJson(const json& rj, RowQualification* q);

}  // namespace capq::capjson
