// A figure in capq's JSON files (metrics.json, verdict.json's stability and misses): a finite
// number, or null for one not measured, which reads back as NaN.
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>

namespace capq {

inline nlohmann::json FigureToJson(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

// `key`'s figure in `j`: NaN when absent or null; throws nlohmann::json::type_error for a value
// that is not a number.
inline double FigureAt(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return NAN;
  return j.at(key).get<double>();
}

}  // namespace capq
