#include "capq/trial/class_gates.h"

#include <cmath>
#include <map>

#include "capq/measurement/metrics.h"
#include "capq/trial/trial.h"

namespace capq {
namespace {

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
      v->reasons.push_back(ClassMissText(c, i, row.slo[i]));
      v->latency_pass = false;
      if (v->outcome == TrialOutcome::kPass) v->outcome = TrialOutcome::kSloFail;
    }
  }
  v->classes = std::move(classes);
}

}  // namespace capq
