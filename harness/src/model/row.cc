#include "capq/model/row.h"

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

}  // namespace capq
