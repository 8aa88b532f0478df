#include "capq/model/row.h"

#include <cmath>

namespace capq {

const char* EngineName(Engine e) {
  switch (e) {
    case Engine::kSglang:
      return "sglang";
    case Engine::kVllm:
      return "vllm";
    case Engine::kLlamacpp:
      return "llamacpp";
    case Engine::kSim:
      return "sim";
  }
  return "unknown";
}

const char* PercentileMethodName(PercentileMethod m) {
  return m == PercentileMethod::kLinear ? "linear" : "nearest_rank";
}

const char* SloMetricName(SloMetric m) {
  switch (m) {
    case SloMetric::kTtft:
      return "ttft";
    case SloMetric::kItl:
      return "itl";
    case SloMetric::kE2e:
      return "e2e";
  }
  return "unknown";
}

const char* ArrivalKindName(ArrivalKind k) {
  switch (k) {
    case ArrivalKind::kClosedLoop:
      return "closed_loop";
    case ArrivalKind::kConstant:
      return "constant";
    case ArrivalKind::kPoisson:
      return "poisson";
    case ArrivalKind::kGamma:
      return "gamma";
  }
  return "unknown";
}

double RateAtLevel(const Row& row, int level) {
  if (!row.open_loop()) return 0;
  return level * row.workload.open_loop.rate_step_rps;
}

int LevelAtRate(const Row& row, double rate_rps) {
  const double step = row.workload.open_loop.rate_step_rps;
  if (!row.open_loop() || !(step > 0) || !std::isfinite(rate_rps)) return 0;
  const double level = std::round(rate_rps / step);
  if (level >= 2147483647.0) return 2147483647;
  if (level <= -2147483647.0) return -2147483647;
  return static_cast<int>(level);
}

}  // namespace capq
