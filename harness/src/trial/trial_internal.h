// Pieces of the trial shared by RunTrial() and ValidateTrialDir(), so that `capq validate`
// re-derives the verdict with exactly the code that decided it; and the state RunTrial()'s phases
// pass on from one to the next, each phase in the file of its concern.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "capq/clock.h"
#include "capq/measurement/arrival.h"
#include "capq/measurement/decode.h"
#include "capq/measurement/early_decision.h"
#include "capq/measurement/evidence_log.h"
#include "capq/measurement/fail_fast.h"
#include "capq/measurement/loadgen.h"
#include "capq/measurement/metrics.h"
#include "capq/measurement/stability.h"
#include "capq/measurement/validator.h"
#include "capq/model/plan.h"
#include "capq/model/row.h"
#include "capq/record/artifacts.h"
#include "capq/record/capacity_data.h"
#include "capq/targets/target.h"
#include "capq/trial/trial.h"

namespace capq {
class Target;
}

namespace capq::internal {

// The cached prompt tokens a cold server shows anyway: the chat template's shared leading tokens,
// measured on the server itself (Target::MeasureTemplatePrefix, recorded in identity.json) and
// never taken from cache counters: a per-slot cache (llama.cpp) shows 0 on a fresh slot and the
// prefix on a used one, and a cache that still holds old prompts would widen any allowance
// learned from the requests.
struct ColdPrefix {
  int64_t allowed_tokens = 0;
  std::optional<int64_t> template_prefix_tokens;  // measured on the server
  std::optional<int64_t> template_tokens;    // prompt_tokens - message tokens (calibrated plans)
  std::optional<int64_t> max_cached_tokens;  // the most any measured request showed (evidence)
  bool counter_available = false;            // some request reported cached tokens
  std::string source;                        // in words
};
// `template_prefix`: the measured prefix, or nullopt when the server renders no template; then
// the whole template overhead (an upper bound on its shared prefix) is allowed where the plan was
// calibrated, else nothing (fail closed).
ColdPrefix EstimateColdPrefix(const TrialPlan& plan, const std::vector<RequestResult>& warmup,
                              const std::vector<RequestResult>& measured,
                              std::optional<int64_t> template_prefix);
nlohmann::json ColdPrefixToJson(const ColdPrefix& c);

// What the verdict needs besides the plan and the raw records, as the trial directory records it
// (identity.json, recount.json), so that `capq validate` decides with the same inputs.
struct Evidence {
  std::optional<int64_t> template_prefix_tokens;    // the cold allowance, measured on the server
  std::optional<int64_t> template_overhead_tokens;  // rendered prompt - message tokens
  std::optional<int64_t> server_cached_tokens_total;
  int64_t server_cached_window_requests = 0;  // requests that counter covers (0: the measured)
  std::string cold_hint;
  std::string miss_hint;           // Target::MissHint, for a reuse row
  CacheCounterRule cache_counter;  // what a stream without a cached-token count means
  size_t counted_as_zero = 0;      // streams ApplyCacheCounterRule read as 0 cached tokens
  std::string served_model_name;   // as sent in every request
  // recount.json: {"method", "unavailable", "counts": {id: tokens}}.
  nlohmann::json recount = nlohmann::json::object();
};
// Reads the streams that finished with usage but no cached-token count as 0 cached tokens where
// the engine's rule says silence means nothing was cached (Target::CacheCounter), in place, before
// any gate or estimate reads them. Returns how many it read so.
size_t ApplyCacheCounterRule(const CacheCounterRule& rule, std::vector<RequestResult>* warmup,
                             std::vector<RequestResult>* measured);
// identity.json (required) and recount.json (may be null: not re-counted).
Evidence EvidenceFromJson(const nlohmann::json& identity, const nlohmann::json& recount);

// Validator input for a decoded trial; its copies of the streams leave their texts and chunk gaps
// out (no gate reads them).
ValidationInput MakeValidationInput(const Row& row, const TrialPlan& plan,
                                    const std::vector<RequestResult>& warmup,
                                    const std::vector<RequestResult>& measured,
                                    const ColdPrefix& cold, const Evidence& evidence);

// The latency side of a trial. Closed loop: the metrics of the measured streams. Open loop (issue
// 13): `meas` holds every scheduled stream, ramp first as planned; the metrics cover the measured
// ones after the ramp, every latency counted from the intended send (each stream of `meas` is
// rebased in place, CountFromIntendedSend), the same counted from the actual send beside them, and
// the stability gates judged over the measured interval.
struct LatencyJudgement {
  TrialMetrics metrics;
  std::optional<TrialMetrics> actual_send;
  std::optional<StabilityVerdict> stability;
};
LatencyJudgement JudgeLatency(const Row& row, const TrialPlan& plan,
                              std::vector<RequestResult>* meas,
                              const std::vector<ServerLoadSample>& server, double time_scale);
// The server's load gauges from server_metrics.jsonl's sample lines ("waiting", "running").
std::vector<ServerLoadSample> ServerLoadSamples(const std::vector<nlohmann::json>& lines);

// What reading the raw evidence back after the load found: the re-count's counts, or why there are
// none.
struct ReadBackOutcome {
  nlohmann::json counts = nlohmann::json::object();  // {id: tokens}
  std::string recount_unavailable;                   // "" = every text was counted
  std::string problem;  // "" = every record read back as the load decoded it
};
// Puts one record read back into its stream's result (its chunk gaps) and counts a measured
// stream's text with the server's tokenizer. The read-back must decode as the load did (the text's
// SHA-256 and the chunk count), else `problem` names the request and the evidence does not hold.
void ReadBackRecord(RequestResult&& back, RequestResult* live, Target& target,
                    ReadBackOutcome* out);

// A reuse row (trial_reuse.cc): the reuse each measured request is declared to be served (the
// plan's, and for a session's later turn its previous turn's prompt and completion tokens) and
// the conversation each later turn must have resent.
void ExpectReuse(const Row& row, const TrialPlan& plan, const std::vector<RequestResult>& measured,
                 ValidationInput* in);
// The trial's declared and served hit ratio and applied think times (capacity_data.h).
ReuseFigures MeasureReuse(const TrialPlan& plan, const ValidationInput& in, double time_scale);
// A mixed row's measured requests as sent, in the plan's order (trial_sent.cc).
SentRequests MeasureSent(const TrialPlan& plan, const std::vector<RequestResult>& measured,
                         double time_scale);
// A session row's measured arrivals: its sessions, `plan.level` at once, their think times
// in wall time; the plan and row must outlive the load.
ArrivalFactory SessionArrivalFactory(const Row& row, const TrialPlan& plan, double time_scale);

// trial_decision.cc: the early decision the load recorded at `at_ns`, re-derived from the measured
// streams alone; nullopt and `problem` when they do not bear it out.
std::optional<EarlyDecision> RederiveDecision(const Row& row, int level,
                                              const std::vector<RequestResult>& measured,
                                              MonoNs at_ns, MonoNs measured_start_ns,
                                              std::string* problem);
// A load stopped on a decision the streams do not bear out: cut short, so no verdict either way.
void UnprovenDecision(const std::string& why, TrialVerdict* v);
// The raw evidence's end-line record of early decision: whether it was on, and what it decided.
nlohmann::json EarlyDecisionHeader(const EarlyDecisionRules& rules,
                                   const std::optional<EarlyDecision>& decided);

// ---- The phases of a trial ------------------------------------------------------------------
// Each returns std::nullopt to go on, or the report of a trial that ended there (could not run,
// interrupted). They pass their results to the next through TrialState and Trial.

// The line `capq trial` shows of what the trial is doing now.
inline void Progress(const TrialOptions& o, const std::string& line) {
  if (o.on_progress) o.on_progress(line);
}

struct TrialState {
  const Row* row = nullptr;
  const TrialOptions* opt = nullptr;
  VerdictContext ctx;
  TrialVerdict verdict;
  std::optional<TrialMetrics> metrics;
  std::optional<TrialPlan> plan;
  std::optional<LoadResult> load;
  std::vector<RequestResult> warm, meas;  // the decoded streams, by phase, in record order
  nlohmann::json identity = {{"schema", kIdentitySchema}};
  nlohmann::json server_info = {{"schema", kServerInfoSchema}};
  std::vector<nlohmann::json> server_metrics;
  nlohmann::json metrics_extra = nlohmann::json::object();
  nlohmann::json recount;  // recount.json; null until the text was re-counted
  FailFastRules fail_fast;
  EarlyDecisionRules early_decision;
  // Opened when the load starts: the staging directory, and raw.jsonl(.zst) in it, written while
  // the load runs (raw_evidence.h).
  std::optional<TrialDirWriter> dir;
  std::unique_ptr<EvidenceWriter> evidence;
  // plan.json in `dir` is the plan as it stands: written when the load starts and again when the
  // calibration rewords it, so the trial's end need not build its JSON (MBs at thousands of
  // prompts) a second time when the streams' results are largest.
  bool plan_written = false;
};

// What the phases share beyond the evidence in TrialState.
struct Trial {
  TrialState s;
  Row effective;  // the row as sent: a sim row's model name comes from its profile
  TargetOptions topts;
  std::unique_ptr<Target> target;
  MonoNs t0 = 0;
  MonoNs setup_deadline = 0;
  double scale = 1.0;
  Evidence ev;  // what the verdict needs besides the records (identity.json, recount)
  std::string before_text, after_text;  // /metrics around the load
};

using PhaseEnd = std::optional<TrialReport>;

// trial.cc runs them in this order.
PhaseEnd PinIdentity(Trial& t);         // trial_prepare.cc
PhaseEnd FlushAndProbe(Trial& t);       // trial_prepare.cc
PhaseEnd PlanPrompts(Trial& t);         // trial_prepare.cc
PhaseEnd QuietPeriod(Trial& t);         // trial_prepare.cc
PhaseEnd Load(Trial& t);                // trial_load.cc
void Decode(Trial& t);                  // trial_readback.cc
PhaseEnd ReadBackAndRecount(Trial& t);  // trial_readback.cc
void Judge(Trial& t);                   // trial_judge.cc
PhaseEnd CheckCompleted(Trial& t);      // trial_judge.cc

// trial_write.cc: plan.json as the plan stands; the trial directory with whatever the trial has
// (Finish), and the same for a trial that ended before its verdict (CouldNotRun).
Status WritePlan(TrialState& s);
TrialReport Finish(TrialState& s);
TrialReport CouldNotRun(TrialState& s, const std::string& why, bool interrupted = false);

}  // namespace capq::internal
