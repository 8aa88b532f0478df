// ParseSloText (capq/model/slo_text.h).
#include "capq/model/slo_text.h"

#include <cctype>
#include <cstdlib>
#include <sstream>

namespace capq {
namespace {

std::vector<std::string> SplitGates(const std::string& text) {
  std::vector<std::string> parts;
  std::string current;
  std::istringstream words(text);
  auto flush = [&] {
    if (!current.empty()) parts.push_back(current);
    current.clear();
  };
  for (std::string w; words >> w;) {
    if (w == "and" || w == ",") {
      flush();
      continue;
    }
    const bool ends_gate = w.back() == ',';
    if (ends_gate) w.pop_back();
    if (!w.empty()) current += (current.empty() ? "" : " ") + w;
    if (ends_gate) flush();
  }
  flush();
  return parts;
}

// "10s", "2.5 s", "50ms": the bound in ms; false when it is not a positive number with a unit.
bool ParseBound(const std::string& text, double* ms) {
  std::string t;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) t += c;
  }
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  const std::string unit = end ? std::string(end) : "";
  if (end == t.c_str() || !(v > 0)) return false;
  if (unit == "ms") *ms = v;
  if (unit == "s") *ms = v * 1000;
  return unit == "ms" || unit == "s";
}

Result<SloGate> ParseGate(const std::string& gate) {
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument("--slo \"" + gate + "\": " + what +
                                   " (expected METRIC pNN < BOUND, e.g. \"ttft p95 < 10s\")");
  };
  std::istringstream in(gate);
  std::string metric, percentile, op;
  in >> metric >> percentile >> op;
  std::string bound;
  std::getline(in, bound);
  SloGate g;
  if (metric == "ttft") {
    g.metric = SloMetric::kTtft;
  } else if (metric == "itl") {
    g.metric = SloMetric::kItl;
  } else if (metric == "e2e") {
    g.metric = SloMetric::kE2e;
  } else {
    return bad("metric '" + metric + "' is not ttft, itl or e2e");
  }
  char* end = nullptr;
  const double p = percentile.size() > 1 && percentile[0] == 'p'
                       ? std::strtod(percentile.c_str() + 1, &end)
                       : -1;
  if (!end || *end != '\0' || !(p > 0 && p < 100)) {
    return bad("'" + percentile + "' is not a percentile p1..p99.9");
  }
  g.percentile = p;
  if (op != "<") return bad("'" + op + "' is not '<' (every gate is a strict upper bound)");
  if (!ParseBound(bound, &g.below_ms)) {
    return bad("bound '" + bound + "' is not a positive number of ms or s");
  }
  return g;
}

}  // namespace

Result<std::vector<SloGate>> ParseSloText(const std::string& text) {
  std::vector<SloGate> gates;
  for (const std::string& part : SplitGates(text)) {
    Result<SloGate> g = ParseGate(part);
    if (!g.ok()) return g.status();
    gates.push_back(*g);
  }
  if (gates.empty()) return Status::InvalidArgument("--slo is empty (e.g. \"ttft p95 < 10s\")");
  return gates;
}

}  // namespace capq
