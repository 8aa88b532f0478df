#include "capq/protocol/class_gates.h"

#include <cmath>
#include <cstdio>
#include <map>

#include "capq/measurement/metrics.h"
#include "capq/protocol/trial.h"
#include "capq/text.h"

namespace capq {
namespace {

nlohmann::json Number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nullptr; }

double NumberOr(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : std::nan("");
}

ClassVerdict JudgeOne(const Row& row, const std::string& name,
                      const std::vector<const RequestResult*>& of, double time_scale) {
  ClassVerdict c;
  c.name = name;
  c.requests = static_cast<int>(of.size());
  const TrialMetrics m = ComputeMetricsOf(of, 0, time_scale, row.percentile_method);
  const bool any = m.ttft_ms.n > 0;
  c.ttft_p50_ms = any ? m.ttft_ms.p50 : std::nan("");
  c.ttft_p95_ms = any ? m.ttft_ms.p95 : std::nan("");
  c.ttft_p99_ms = any ? m.ttft_ms.p99 : std::nan("");
  for (const SloGate& gate : row.slo) {
    const double v = SloValueMs(m, gate);
    c.gate_ms.push_back(v);
    c.gate_passed.push_back(std::isfinite(v) && v < gate.below_ms);
  }
  return c;
}

}  // namespace

bool ClassVerdict::passed() const {
  for (bool p : gate_passed) {
    if (!p) return false;
  }
  return !gate_passed.empty();
}

std::vector<ClassVerdict> JudgeClasses(const Row& row, const TrialPlan& plan,
                                       const std::vector<RequestResult>& measured,
                                       double time_scale) {
  std::vector<ClassVerdict> out;
  std::map<std::string, std::string> class_of;
  for (const PlanRequest& r : plan.measured) class_of[r.id] = r.traffic_class;
  for (const std::string& name : GateClasses(row)) {
    std::vector<const RequestResult*> of;
    for (const RequestResult& r : measured) {
      if (class_of[r.id] == name) of.push_back(&r);
    }
    out.push_back(JudgeOne(row, name, of, time_scale));
  }
  return out;
}

void ApplyClassGates(const Row& row, std::vector<ClassVerdict> classes, TrialVerdict* v) {
  for (const ClassVerdict& c : classes) {
    for (size_t i = 0; i < c.gate_passed.size() && i < row.slo.size(); ++i) {
      if (c.gate_passed[i]) continue;
      const SloGate& g = row.slo[i];
      char p[32];
      std::snprintf(p, sizeof p, "%g", g.percentile);
      const std::string what = "class " + c.name + ": p" + p + " " + SloMetricName(g.metric);
      v->reasons.push_back(std::isfinite(c.gate_ms[i])
                               ? what + " " + Fmt("%.1f", c.gate_ms[i]) + " ms is not below " +
                                     Fmt("%.1f", g.below_ms) + " ms"
                               : what + ": nothing measured, so it is not below " +
                                     Fmt("%.1f", g.below_ms) + " ms");
      v->latency_pass = false;
      if (v->outcome == TrialOutcome::kPass) v->outcome = TrialOutcome::kSloFail;
    }
  }
  v->classes = std::move(classes);
}

nlohmann::json ClassVerdictsToJson(const std::vector<ClassVerdict>& classes) {
  nlohmann::json out = nlohmann::json::array();
  for (const ClassVerdict& c : classes) {
    nlohmann::json gates = nlohmann::json::array();
    for (size_t i = 0; i < c.gate_ms.size(); ++i) {
      gates.push_back({{"measured_ms", Number(c.gate_ms[i])}, {"passed", c.gate_passed[i]}});
    }
    out.push_back({{"class", c.name},
                   {"requests", c.requests},
                   {"ttft_p50_ms", Number(c.ttft_p50_ms)},
                   {"ttft_p95_ms", Number(c.ttft_p95_ms)},
                   {"ttft_p99_ms", Number(c.ttft_p99_ms)},
                   {"passed", c.passed()},
                   {"slo", gates}});
  }
  return out;
}

std::vector<ClassVerdict> ClassVerdictsFromJson(const nlohmann::json& j) {
  std::vector<ClassVerdict> out;
  if (!j.is_array()) return out;
  for (const nlohmann::json& e : j) {
    ClassVerdict c;
    c.name = e.value("class", "");
    c.requests = e.value("requests", 0);
    c.ttft_p50_ms = NumberOr(e, "ttft_p50_ms");
    c.ttft_p95_ms = NumberOr(e, "ttft_p95_ms");
    c.ttft_p99_ms = NumberOr(e, "ttft_p99_ms");
    for (const nlohmann::json& g : e.value("slo", nlohmann::json::array())) {
      c.gate_ms.push_back(NumberOr(g, "measured_ms"));
      c.gate_passed.push_back(g.value("passed", false));
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace capq
