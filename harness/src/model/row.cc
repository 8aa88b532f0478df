#include "capq/model/row.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

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
    case Engine::kOpenai:
      return "openai";
  }
  return "unknown";
}

std::optional<Engine> ParseEngine(std::string_view name) {
  for (Engine e :
       {Engine::kSglang, Engine::kVllm, Engine::kLlamacpp, Engine::kOpenai, Engine::kSim}) {
    if (name == EngineName(e)) return e;
  }
  return std::nullopt;
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
    case ArrivalKind::kSessions:
      return "sessions";
    case ArrivalKind::kReplay:
      return "replay";
  }
  return "unknown";
}

std::optional<ArrivalKind> ParseArrivalKind(std::string_view name) {
  for (ArrivalKind k : {ArrivalKind::kClosedLoop, ArrivalKind::kConstant, ArrivalKind::kPoisson,
                        ArrivalKind::kGamma, ArrivalKind::kSessions, ArrivalKind::kReplay}) {
    if (name == ArrivalKindName(k)) return k;
  }
  return std::nullopt;
}

int PrefixReuse::Prefixes() const {
  int n = 0;
  for (const PrefixGroup& g : groups) n += g.prefixes;
  return n;
}

const ReuseTolerance& Row::reuse_tolerance() const {
  static const ReuseTolerance kNone;
  if (prefix) return prefix->tolerance;
  if (sessions) return sessions->tolerance;
  return mix && mix->blocks ? mix->blocks->tolerance : kNone;
}

int Sessions::MaxTurns() const {
  if (paths.empty()) return turns;
  size_t n = 0;
  for (const auto& p : paths) n = std::max(n, p.size());
  return static_cast<int>(n);
}

bool SendsTraceSamples(const Row& row) { return row.mix || (row.sessions && row.sessions->blocks); }

std::string TurnClass(int turn) { return "turn" + std::to_string(turn); }

std::string TurnClass(const Sessions& s, int turn) {
  return s.gate_every_turn || turn <= 1 ? TurnClass(turn) : kLaterTurnsClass;
}

std::vector<std::string> GateClasses(const Row& row) {
  std::vector<std::string> out;
  if (row.mix) {
    for (const MixClass& c : row.mix->classes) out.push_back(c.name);
  } else if (row.sessions) {
    const Sessions& s = *row.sessions;
    for (int t = 1; t <= s.MaxTurns(); ++t) {
      if (out.empty() || out.back() != TurnClass(s, t)) out.push_back(TurnClass(s, t));
    }
  }
  return out;
}

double RateAtLevel(const Row& row, LoadLevel level) {
  if (!row.open_loop()) return 0;
  return level * row.workload.open_loop.rate_step_rps;
}

LoadLevel LevelAtRate(const Row& row, double rate_rps) {
  const double step = row.workload.open_loop.rate_step_rps;
  if (!row.open_loop() || !(step > 0) || !std::isfinite(rate_rps)) return 0;
  const double level = std::round(rate_rps / step);
  if (level >= 2147483647.0) return 2147483647;
  if (level <= -2147483647.0) return -2147483647;
  return static_cast<int>(level);
}

LoadScale LoadScaleOf(const Row& row) {
  return LoadScale{row.open_loop(), row.open_loop() ? row.workload.open_loop.rate_step_rps : 0};
}

std::string LoadLabel(const Row& row, LoadLevel level) { return LoadScaleOf(row).Label(level); }

std::vector<SloTier> AllTiers(const Row& row) {
  std::vector<SloTier> out = {SloTier{kPrimaryTier, row.slo}};
  out.insert(out.end(), row.slo_tiers.begin(), row.slo_tiers.end());
  return out;
}

}  // namespace capq
