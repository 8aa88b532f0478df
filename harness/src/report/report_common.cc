// What the report's figures and tables share (report_internal.h).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "capq/qualify/qualify.h"
#include "report_internal.h"

namespace capq::report {

Unit UnitFor(double below_ms) { return GateUnitFor(below_ms); }

double Slo(const RowInfo& r) { return r.slo.empty() ? NAN : r.slo.front().below_ms; }

// The row's TTFT gate, the one the TTFT figures draw as their SLO line; nullptr when it has none.
const SloGate* TtftGate(const RowInfo& r) {
  for (const auto& g : r.slo) {
    if (g.metric == SloMetric::kTtft) return &g;
  }
  return nullptr;
}

// The unit of the TTFT figures and columns: the TTFT gate's, else the first gate's.
Unit TtftUnit(const RowInfo& r) { return UnitFor(TtftGate(r) ? TtftGate(r)->below_ms : Slo(r)); }

// A row's number as written (12.3 stays 12.3, 99.9 stays 99.9): "%g".
// "p95 ttft < 2500 ms": one gate as the row states it.
std::string GateSpec(const SloGate& g) {
  return "p" + FormatShortest(g.percentile) + " " + SloMetricName(g.metric) + " < " +
         FormatShortest(g.below_ms) + " ms";
}

std::string SloText(const RowInfo& r) {
  std::string out;
  for (const auto& g : r.slo) {
    if (!out.empty()) out += " and ";
    out += GateSpec(g);
  }
  return out.empty() ? "none" : out;
}

std::string Shape(const RowInfo& r) {
  return std::to_string(r.input_tokens) + " / " + std::to_string(r.output_tokens);
}

std::optional<int> Boundary(const RowQualification& q) {
  if (q.status == QualifyStatus::kProven && q.proven_level()) return q.proven_level();
  if (q.status == QualifyStatus::kLowered && q.operating_point) return q.operating_point;
  return std::nullopt;
}

std::string VerdictClass(const TrialSummary& t) {
  if (t.outcome == TrialOutcome::kPass) return "pass";
  if (t.outcome == TrialOutcome::kSloFail) return "fail";
  return "other";
}

std::string VerdictWord(const TrialSummary& t) {
  if (t.outcome == TrialOutcome::kPass) return "pass";
  if (t.outcome == TrialOutcome::kSloFail) return "fail";
  return TrialOutcomeName(t.outcome);
}

// The gate that decided a trial against its bound ("itl p95 55.1 ms >= 50.0 ms", or on a rate
// row a stability gate's failure); for a broken stream the correctness gate; empty when neither.
std::string DecidedBy(const TrialSummary& t) {
  if (t.outcome == TrialOutcome::kCorrectnessFail && !t.failed_gates.empty()) {
    return "correctness gate " + t.failed_gates.front().name;
  }
  return DecidingGateText(t);
}

// "fail (itl p95 55.1 ms >= 50.0 ms)": a trial's verdict with the gate that decided it.
std::string VerdictTip(const TrialSummary& t) {
  std::string by = DecidedBy(t);
  return VerdictWord(t) + (by.empty() ? "" : " (" + by + ")");
}

std::string Id(const std::string& prefix, const std::string& row) {
  std::string out = prefix + "-";
  for (char c : row) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  return out;
}

// Jitter so several trials at one C stay visible side by side.
double Jitter(int index, int count, double width) {
  if (count <= 1) return 0;
  // Stay within +-0.4 of the C so neighbouring concurrencies never interleave.
  width = std::min(width, 0.8 / count);
  return (index - (count - 1) / 2.0) * width;
}

bool AnyRateRow(const CapacityData& d) {
  for (const auto& q : d.rows) {
    if (q.row.open_loop()) return true;
  }
  return false;
}

}  // namespace capq::report
