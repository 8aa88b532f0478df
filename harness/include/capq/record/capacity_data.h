// Capacity data (schema capq/capacity/v1): everything a qualification measured, per row, with
// enough per trial to rebuild every table of the seed's Part IV and every figure of the report
// without the trial directories: latency percentiles, ITL, E2E, throughput, request rate, the
// server's prompt range, correctness totals, the verdict, the command and the checksums.
//
// Pure data + JSON; the only I/O is reading a trial directory and reading and writing the file.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "capq/engine/calibrate.h"
#include "capq/measurement/metrics.h"
#include "capq/measurement/validator.h"
#include "capq/model/qualify_phase.h"
#include "capq/model/row.h"
#include "capq/record/verdict.h"
#include "capq/status.h"

namespace capq {

inline constexpr const char* kCapacitySchema = "capq/capacity/v1";

struct SloCheck {
  std::string metric;  // "ttft" | "itl" | "e2e"
  double percentile = 95;
  double below_ms = 0;
  double measured_ms = 0;  // NaN when nothing was measured
  bool passed = false;
  GateConfidence confidence;  // how sure the pass (or the fail) is (capq/measurement/certainty.h)
  bool at_least = false;      // decided early on this gate: measured_ms is a lower bound
};
// The checks of a trial's verdict, as the capacity data keeps them.
std::vector<SloCheck> SloChecksOf(const std::vector<SloGateResult>& results);

// A level's gating value as the engine model predicted it (capq/qualify/predict.h).
struct PredictedPoint {
  int level = 0;
  double gating_ms = 0;  // the row's first SLO gate, predicted
  bool passes = false;   // every gate of the row predicted strictly below its limit
};

// A predicted level some trial measured: how far the prediction was from the trials there.
struct PredictionCheck {
  int level = 0;
  double predicted_ms = 0;  // PredictedPoint::gating_ms
  double measured_ms = 0;   // the median of the trials' gating values at the level
  int trials = 0;
  double error_pct = 0;  // (predicted - measured) / measured x 100: below 0, it under-predicted
};

// One trial as the capacity data keeps it. Durations are in the row's time base (virtual ms on
// simulator rows, as the trial reported them).
// A reuse row's trial (metrics.json "reuse"): the hit ratio it declared and the one served, over
// the measured requests with a declared reuse and a cache counter, and a session row's think
// times, declared by the plan and applied by the load (send of a turn minus the end of the one
// before, in the server's seconds).
struct ReuseFigures {
  int requests = 0;
  double declared_ratio = 0, served_ratio = 0;
  int think_turns = 0;  // later turns sent
  double think_declared_mean_s = 0, think_applied_mean_s = 0;
};
nlohmann::json ReuseFiguresToJson(const ReuseFigures& r);
ReuseFigures ReuseFiguresFromJson(const nlohmann::json& j);

// A mixed row's trial (metrics.json "sent"): its measured requests in send order, each as the
// server counted it (-1 where it did not) and when it was sent, in the server's (virtual) seconds
// after the first; a replay also says which trace sample its first request sent (the rest follow
// in the trace's order). What the report holds beside the trace.
struct SentRequest {
  int64_t input_tokens = -1, output_tokens = -1;
  double send_s = 0;
};
struct SentRequests {
  std::vector<SentRequest> requests;
  int64_t first_trace_index = -1;
};
nlohmann::json SentRequestsToJson(const SentRequests& s);
SentRequests SentRequestsFromJson(const nlohmann::json& j);

// A trace row's traffic as it fits the row (RowInfo::trace): each sample's fitted lengths and its
// arrival offset (NaN without one), in file order.
struct TracePoint {
  int64_t input_tokens = 0, output_tokens = 0;
  double offset_s = 0;
};

// A correctness gate a trial failed: its name ("nonempty_deltas") and its evidence.
struct FailedGate {
  std::string name, evidence;
  // "nonempty_deltas: 2 streams empty: m3, m9"; the name alone without evidence.
  std::string Text() const { return evidence.empty() ? name : name + ": " + evidence; }
  bool operator==(const FailedGate&) const = default;
};

struct TrialSummary {
  QualifyPhase phase = QualifyPhase::kConfirm;
  // The load level: the concurrency C, or on a rate row the rate in steps (rate_rps below).
  LoadLevel level = 0;
  double rate_rps = 0;  // rate rows: the trial's arrival rate, level * rate_step_rps; else 0
  int trial = 1;
  uint64_t seed = 0;
  std::string corpus;  // plan.json corpus id: the prompts this trial sent ("confirm/c7/s202")
  // Coldness evidence (identity.json): the most cached prompt tokens any measured request showed,
  // and the template prefix the server shares across prompts (what verify_cold allowed); -1 when
  // the trial did not record it.
  int64_t max_cached_tokens = -1;
  int64_t cold_allowed_tokens = -1;
  std::string move;  // probes: why the locator chose this C ("double", "bisect", ...)
  TrialOutcome outcome = TrialOutcome::kCouldNotRun;  // verdict.json "outcome"
  int exit_code = 3;
  bool latency_pass = false;
  bool correctness_pass = false;
  bool complete = false;
  std::vector<SloCheck> slo;
  // The gates of the row's further SLO tiers that `slo` does not hold, each judged once on the
  // same measurement (verdict.json tier_slo); no part of `outcome`, which is the primary tier's.
  std::vector<SloCheck> tier_slo;
  std::vector<std::string> reasons;
  // Each enabled correctness gate that failed, the one fail fast stopped at first.
  std::vector<FailedGate> failed_gates;
  // The gates beside the SLO the trial failed (verdict.json "misses"), in their order: a rate
  // row's stability gates, a reuse row's served reuse; empty when every one held.
  std::vector<GateMiss> misses;
  // The load stopped once this gate could no longer pass (verdict.json early_decision): the
  // latency figures cover the requests that finished before it.
  std::optional<EarlyDecision> decided;
  // Rate rows: the queue over the measured interval (verdict.json stability.series): seconds into
  // it, the client's in-flight count, the server's queue gauge (-1: not reported); and the
  // client's send lateness p99 in wall ms (NaN when unknown).
  struct QueuePoint {
    double t_s = 0, in_flight = 0, server_waiting = -1;
  };
  std::vector<QueuePoint> queue_series;
  double send_lateness_p99_ms = NAN;
  double time_scale = 1;
  std::string percentile_method;
  bool has_metrics = false;
  size_t requests = 0;
  Distribution ttft_ms, itl_ms, e2e_ms;
  double ttft_p95_steady_ms = 0;
  std::vector<double> ttft_ms_by_arrival;  // measured requests in send order
  double output_tok_s = 0;
  double request_per_s = 0;
  double duration_s = 0;
  int64_t prompt_tokens_min = 0, prompt_tokens_max = 0;
  double tokens_per_chunk_mean = 0;  // completion tokens per content chunk (0: not recorded)
  // What the server reported about itself (server_info.json "limits"), under its engine's names;
  // read from the trial directory and not kept in the capacity data.
  std::map<std::string, std::string> server_limits;
  CorrectnessTotals totals;
  std::string dir;      // trial directory, relative to the capacity data's folder when inside it
  std::string command;  // the exact command (command.txt)
  std::string sha256sums;
  std::string started_utc;
  double start_offset_s = 0;  // wall seconds since the row's qualification started
  double wall_s = 0;          // wall seconds the trial took (preparation included)
  // A mixed row: each class's requests, TTFT tail and gates (verdict.json "classes").
  std::vector<ClassVerdict> classes;
  // The gates of the class nearest its bounds (or furthest past them), as checks named "<class>
  // <metric>" ("turn1 ttft"); empty without classes. A trial whose global gates held is shown by
  // them when they are nearer their bounds (deciding_gate.h). Derived from `classes` and `slo`
  // (ClassChecksOf).
  std::vector<SloCheck> class_slo;
  std::optional<ReuseFigures> reuse;  // a reuse row's (metrics.json "reuse")
  std::optional<SentRequests> sent;   // a mixed row's (metrics.json "sent")

  bool passed() const { return outcome == TrialOutcome::kPass; }
  // measured / below_ms of the gate nearest to failing (largest ratio); NaN when unknown. A trial
  // decided early gives its deciding gate's bound / below_ms (>= 1): a lower bound of the ratio.
  double GateRatio() const;
  // The first SLO gate's measured value, NaN when absent. Which gate decided a verdict is
  // DecidingGate() / DecideSide() (capq/qualify/deciding_gate.h).
  double GatingMs() const;
};

// TrialSummary::class_slo from its classes and slo.
std::vector<SloCheck> ClassChecksOf(const TrialSummary& t);

// Reads verdict.json (required), metrics.json, command.txt and SHA256SUMS from a trial directory.
// `phase`, `move` and the timing fields are left for the caller.
Result<TrialSummary> ReadTrialDir(const std::string& dir);

struct PhaseCost {
  std::string name;  // "baseline" | "locate" | "confirm"
  int trials = 0;
  double wall_s = 0;
  double start_offset_s = 0;
};

struct BaselineCheck {
  bool checked = false;  // the row gives expect.baseline
  bool within = true;
  std::optional<double> ttft_p50_ms, expected_ttft_p50_ms;
  std::optional<double> itl_p50_ms, expected_itl_p50_ms;
  double tolerance_pct = 0;
  std::string message;
};

// The row as the report needs it (a snapshot: the row file may change after qualification).
struct RowInfo {
  std::string id, title, family, source_path;
  std::string engine, image, model, model_revision, served_model_name, hardware, driver;
  std::string sim_profile;
  double time_scale = 1;
  int64_t input_tokens = 0, output_tokens = 0;
  std::vector<SloGate> slo;
  std::string percentile_method = "linear";
  int warmup_requests = 0, warmup_concurrency = 1;
  int min_requests = 0, per_concurrency = 0;
  int trials_count = 0;
  double quiet_period_s = 0;
  std::optional<int> expected_cmax;  // the row's claim before this qualification
  std::optional<double> confidence;  // the pass-side confidence the row requires (Row::confidence)
  // How requests arrive: the row's kind (closed loop for data written before
  // rate rows). The rest is for rate rows: the claim's resolution, the measured interval (one of
  // duration_s and requests, after ramp_s) and the claim before this qualification.
  ArrivalKind arrival = ArrivalKind::kClosedLoop;
  double rate_step_rps = 0;
  std::optional<double> measured_duration_s;
  std::optional<int> measured_requests;
  double ramp_s = 0;
  std::optional<double> expected_rmax_rps;
  // A mixed row's classes and shares in the row's order (samples not kept); empty otherwise.
  std::vector<MixClass> mix;
  // A reuse row's declared reuse in words ("2 prefixes of 768 tokens for 75% of prompts", "4
  // turns, +128 tokens each, think exponential mean 1 s"); "" otherwise.
  std::string reuse;
  // A mixed row's traffic file (its name) and every sample of it as the row fits it.
  std::string trace_file;
  std::vector<TracePoint> trace;

  bool open_loop() const {
    return arrival != ArrivalKind::kClosedLoop && arrival != ArrivalKind::kSessions;
  }
  // How this row's load levels read (capq/model/row.h): "C=6" or "R=1.25 rps".
  LoadScale scale() const { return LoadScale{open_loop(), open_loop() ? rate_step_rps : 0}; }
};
RowInfo RowInfoFromRow(const Row& row);
// A mixed row's classes as capacity data keeps them: [{"class", "share"}] (capacity_mix.cc).
nlohmann::json MixInfoToJson(const std::vector<MixClass>& mix);
std::vector<MixClass> MixInfoFromJson(const nlohmann::json& j);

// A field of the row whose change must trigger requalification, with the value it was measured
// at: {"identity.image", "repo@sha256:..."}, {"identity.server_expect.max_running_requests", "9"}.
struct PinnedField {
  std::string field;  // as the row file names it
  std::string value;
};

// What the recommended level keeps below the gate that came closest to its bound: the worst trial
// (highest measured / bound) at `level`, which is the recommended level when any trial measured it,
// else the level the recommendation stepped down from.
struct KeptMargin {
  int level = 0;
  bool at_recommended = false;
  int trials = 0;    // trials with a measured gate at `level`
  std::string gate;  // "ttft p95"
  double measured_ms = NAN;
  double below_ms = NAN;
  std::string text;  // "ttft p95 6.10 s vs 10.00 s at C=6: 39% headroom (worst of 2 trials)"

  double headroom_pct() const { return 100.0 * (1.0 - measured_ms / below_ms); }
};

// The operating limit capq recommends for a row: a policy layered on the measured boundary, never
// a capacity claim (capq/qualify/recommend.h states the rule). A level as RowQualification's.
struct Recommendation {
  std::optional<int> level;  // nullopt: no recommendation, `reason` says why
  int from_level = 0;        // the proven boundary, or a lowered operating point; 0 when none
  int steps_down = 0;        // from_level - level
  bool thin_margin = false;
  bool noisy = false;
  std::string rule;    // "one step below the proven Cmax (default)"
  std::string reason;  // the evidence for the rule, in words
  std::optional<KeptMargin> margin;
  std::vector<PinnedField> requalify_on;
};

// Outcome of one row's qualification.
enum class QualifyStatus {
  kProven,            // every Cmax trial passed, every Cmax+1 trial failed
  kLowered,           // noisy boundary: an operating point below the overlap, not a proven Cmax
  kNoFailUpToCap,     // every probe up to --max-concurrency passed: Cmax >= cap, not a claim
  kFailsAtOne,        // C = 1 misses the SLO
  kCorrectnessFail,   // a stream broke a correctness gate: named in `failed_gate`
  kCouldNotRun,       // identity, server, row or setup problem
  kBaselineMismatch,  // C = 1 outside expect.baseline's tolerance
  kInterrupted,
};
const char* QualifyStatusName(QualifyStatus s);
Result<QualifyStatus> ParseQualifyStatus(const std::string& name);
// 0 proven; 1 no boundary proven (lowered, cap, fails at 1); 2 correctness; 3 could not run or
// baseline mismatch; 130 interrupted.
int QualifyExitCode(QualifyStatus s);

// One trial as an SLO tier judged it: which trial (phase, level, index), the tier's verdict on it
// (pass or SLO fail, or the trial's own outcome when that is no SLO verdict), and whether the tier
// took it from a trial already run (reused) or ran it.
struct TierTrial {
  QualifyPhase phase = QualifyPhase::kConfirm;
  LoadLevel level = 0;
  int trial = 1;
  TrialOutcome outcome = TrialOutcome::kCouldNotRun;
  bool reused = false;
};

// One SLO tier's qualification (Row::slo_tiers): its own boundary, proven on the trials of the
// whole qualification. Tier 0 is the primary (the row's slo): its result is the row's own.
struct TierQualification {
  std::string name;
  std::vector<SloGate> slo;
  QualifyStatus status = QualifyStatus::kCouldNotRun;
  std::optional<int> cmax;             // set when proven
  std::optional<int> operating_point;  // proven: Cmax; lowered: the lower point
  std::string message;
  std::string summary_line;       // "row tier ttft_itl: Cmax = 3 — C=3 itl p95 ... pass, ..."
  std::vector<TierTrial> trials;  // every trial it judged, once each, in the order it used them
  int trials_run = 0;             // trials run for this tier
  int trials_reused = 0;          // trials it judged that were already run

  // The level the tier admits: cmax, or a lowered operating point; nullopt otherwise.
  std::optional<int> admitted() const;
  // The trials that decided it: the confirmations at its operating point and one level above, by
  // level and index.
  std::vector<const TierTrial*> DecidedBy() const;
};

// One side of a boundary, every confirmation at its level together: for each of the row's SLO
// gates (in the row's order), the confidence of the side's claim, below the bound on the pass side
// and at or above it on the fail side, from all their requests (capq/measurement/certainty.h).
struct BoundarySide {
  LoadLevel level = 0;
  bool pass_side = true;
  std::vector<GateConfidence> gates;
};

// What became of a row's required confidence (Row::confidence) on the pass side of its boundary.
struct ConfidenceClaim {
  double asked = 0;
  double reached = NAN;  // the side's lowest gate confidence when the qualification stopped
  bool met = false;      // reached >= asked, with every trial at the level passed
  int added_trials = 0;  // confirmation trials beyond the row's trials.count at that level
  std::string note;      // in words, output only: how it was met, or why not
};

// The load levels below (operating_point, max_level, predicted_cmax, each trial's level)
// are levels as capq/model/load_level.h defines them: the concurrency C of a closed-loop row,
// the rate in steps of a rate row (RowInfo::scale() reads them as rates).
struct RowQualification {
  RowInfo row;
  QualifyStatus status = QualifyStatus::kCouldNotRun;
  std::optional<int> cmax;             // closed loop: set when proven
  std::optional<double> rmax_rps;      // rate rows: set when proven, a multiple of the step
  std::optional<int> operating_point;  // proven: the boundary's level; lowered: the lower point
  std::string message;                 // in words, why the result is what it is
  std::string failed_gate;             // correctness failures: the gate(s) named
  std::string summary_line;            // "row: Cmax = 4 — C=4 ttft p95 ... pass, C=5 ... fail"
  // The boundary's sides (the pass side, then the fail side when trials ran there); empty
  // without a proven boundary or an operating point.
  std::vector<BoundarySide> boundary_confidence;
  std::optional<ConfidenceClaim> confidence_claim;  // only for a row that requires a confidence
  LoadLevel max_level = 0;                          // the highest level the locator might probe
  int probes = 0;
  int probe_budget = 0;               // ceil(log2 Cmax) + 2 when a Cmax was found
  std::optional<int> predicted_cmax;  // the locator's hint, when one was given
  std::string prediction_note;
  // Where the hint came from ("engine profile small", "baseline calibration ..."), the predicted
  // gating value per level, and for a calibrated engine model how each parameter was obtained.
  std::string prediction_source;
  std::optional<int> refined_cmax;  // the baseline's prediction refined by a probe under load
  std::vector<PredictedPoint> predicted_curve;     // the latest prediction's
  std::vector<PredictionCheck> prediction_checks;  // the curve beside the trials, level by level
  std::vector<engine::Parameter> prediction_parameters;
  BaselineCheck baseline;
  std::vector<PhaseCost> phases;
  std::vector<TrialSummary> trials;  // in the order they ran
  std::string started_utc, finished_utc;
  double wall_s = 0;
  bool complete = false;  // false when interrupted or stopped before the end
  std::string url;        // the server measured (no credentials)
  // The operating limit recommended on top of the result (capq/qualify/recommend.h). Data
  // written without one reads with `recommendation_recorded` false and an empty recommendation;
  // the policy fills it from the trials (RecommendWhereNotRecorded), never the reader.
  Recommendation recommendation;
  bool recommendation_recorded = true;
  // Rows with SLO tiers: every tier side by side, the primary first (empty on other rows), and the
  // trials run for further tiers only; with `trials`, every trial of the qualification, each run
  // once.
  std::vector<TierQualification> tiers;
  std::vector<TrialSummary> tier_trials;

  // Trials of one phase at one level, in order.
  std::vector<const TrialSummary*> Trials(QualifyPhase phase, LoadLevel level) const;
  // The proven boundary as a level: cmax, or rmax_rps in steps on a rate row; nullopt unproven.
  std::optional<int> proven_level() const;
  // The trial (phase, level, index) in `trials` or `tier_trials`; nullptr when none ran.
  const TrialSummary* FindTrial(QualifyPhase phase, LoadLevel level, int trial) const;
};

struct CapacityData {
  std::string schema = kCapacitySchema;
  std::string generated_utc;
  std::string command;
  std::vector<RowQualification> rows;
};

nlohmann::json TrialSummaryToJson(const TrialSummary& t);
nlohmann::json RowQualificationToJson(const RowQualification& q);
nlohmann::json CapacityDataToJson(const CapacityData& d);
// Strict about the schema string and the field types it reads; errors name the key.
Result<CapacityData> CapacityDataFromJson(const nlohmann::json& j);

Result<CapacityData> ReadCapacityData(const std::string& path);
Status WriteCapacityData(const std::string& path, const CapacityData& d);

}  // namespace capq
