// A trial's verdict as data: its outcome, every gate's result, the correctness report, the
// stability and per-class verdicts, and verdict.json's codec (schema capq/verdict/v1). Written by
// the trial, read back by validate, qualify and the report; judging lives in trial/.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "capq/measurement/certainty.h"
#include "capq/measurement/early_decision.h"
#include "capq/measurement/fail_fast.h"
#include "capq/measurement/gate_miss.h"
#include "capq/measurement/stability.h"
#include "capq/measurement/validator.h"
#include "capq/model/qualify_phase.h"
#include "capq/model/row.h"
#include "capq/status.h"

namespace capq {

enum class TrialOutcome { kPass, kSloFail, kCorrectnessFail, kCouldNotRun, kInterrupted };
// "pass", "slo_fail", "correctness_fail", "could_not_run", "interrupted"
const char* TrialOutcomeName(TrialOutcome o);
// The inverse of TrialOutcomeName(); InvalidArgument for anything else.
Result<TrialOutcome> ParseTrialOutcome(const std::string& name);
// A verdict on latency: pass or SLO fail (not a broken stream, a trial that could not run or an
// interrupted one).
inline bool IsSloVerdict(TrialOutcome o) {
  return o == TrialOutcome::kPass || o == TrialOutcome::kSloFail;
}

struct ClassVerdict {
  std::string name;
  int requests = 0;                                          // measured requests of the class
  double ttft_p50_ms = 0, ttft_p95_ms = 0, ttft_p99_ms = 0;  // NaN when none had a TTFT
  std::vector<double> gate_ms;  // per row.slo gate: the class's value (NaN: nothing measured)
  std::vector<bool> gate_passed;
  bool passed() const;
};

// Gate `i` of a class that missed it, in words: "class turn1: p95 ttft 867.9 ms is not below
// 800.0 ms" (`gate` is the row's SLO gate `i`).
std::string ClassMissText(const ClassVerdict& c, size_t i, const SloGate& gate);

nlohmann::json ClassVerdictsToJson(const std::vector<ClassVerdict>& classes);
std::vector<ClassVerdict> ClassVerdictsFromJson(const nlohmann::json& j);

struct SloGateResult {
  SloGate gate;
  double measured_ms = 0;  // NaN when nothing was measured (then passed = false)
  bool passed = false;
  GateConfidence confidence;  // how sure the pass (or the fail) is, from this trial's requests
  // The trial was decided early on this gate: measured_ms is the least its percentile could
  // still have ended at ("at least"), not a measurement.
  bool at_least = false;
};

struct TrialVerdict {
  TrialOutcome outcome = TrialOutcome::kCouldNotRun;
  bool latency_pass = false;
  bool correctness_pass = false;
  std::vector<SloGateResult> slo;
  // The gates of the row's SLO tiers (Row::slo_tiers) that `slo` does not hold, each judged once
  // on the same metrics, in the tiers' order. They take no part in `outcome`: each tier reads its
  // own verdict from `slo` and these (capq/qualify/tiers.h).
  std::vector<SloGateResult> tier_slo;
  CorrectnessReport correctness;
  std::vector<std::string> reasons;  // in words: "p95 ttft 10674.2 ms is not below 10000 ms"
  // Fail fast stopped the load at this stream; reasons[0] says so.
  std::optional<StreamBreak> stopped_at;
  // The load stopped once this gate could no longer pass (early_decision.h); reasons[0] says so.
  // The other gates' figures then cover only the requests that finished before it.
  std::optional<EarlyDecision> decided;
  // Open loop: the stability gates (stability.h). A queue that grew or a latency that drifted
  // fails latency like an SLO gate; a client that fell behind its schedule makes the trial one
  // that could not run.
  std::optional<StabilityVerdict> stability;
  // The gates beside the SLO that failed latency, with their figures: the stability checks, then
  // the capacity gates (cache_reuse). Their texts are among `reasons` too.
  std::vector<GateMiss> misses;
  // A mixed row: each class's gates (class_gates.h), in the row's class order.
  std::vector<ClassVerdict> classes;
  // 0 pass, 1 SLO fail, 2 correctness fail, 3 could not run, 130 interrupted.
  int ExitCode() const;
};

// Facts a verdict file records beside the verdict itself.
struct VerdictContext {
  std::string row_id;
  LoadLevel level = 1;
  int trial_index = 1;
  uint64_t seed = 0;
  QualifyPhase phase = QualifyPhase::kConfirm;
  double time_scale = 1;
  std::string started_utc;
  bool complete = true;
  bool insecure_tls = false;
};
nlohmann::json VerdictToJson(const TrialVerdict& v, const VerdictContext& ctx);
// Reads outcome, flags, SLO results and reasons back (the correctness section is kept as JSON in
// `correctness_json`); InvalidArgument naming the key when a field is missing.
struct StoredVerdict {
  TrialVerdict verdict;
  VerdictContext context;
  nlohmann::json correctness_json;
};
Result<StoredVerdict> VerdictFromJson(const nlohmann::json& j);

}  // namespace capq
