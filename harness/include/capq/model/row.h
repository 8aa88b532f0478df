// The row model: one serving identity and one workload shape, as plain data (row-schema.md).
// A Row is produced only by the loader (row_loader.h), which refuses vague rows; every field below
// is therefore filled (defaults resolved) by the time other layers see it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "capq/model/load_level.h"
#include "capq/model/mix.h"
#include "capq/model/reuse_tolerance.h"

namespace capq {

// kOpenai: any OpenAI-compatible server (TGI, trtllm-serve, Ollama, a gateway), known only by
// /v1/models: no flush, no limits, maybe no tokenizer (targets/openai_target.cc says what each gate
// can prove there).
enum class Engine { kSglang, kVllm, kLlamacpp, kSim, kOpenai };
const char* EngineName(Engine e);  // "sglang", "vllm", "llamacpp", "sim", "openai"
// The engine `name` names (EngineName); nullopt for any other text.
std::optional<Engine> ParseEngine(std::string_view name);
// The real engines a simulator dialect can stand in for, in the order names are listed.
constexpr Engine kDialectEngines[] = {Engine::kSglang, Engine::kVllm, Engine::kLlamacpp};

enum class PercentileMethod { kLinear, kNearestRank };
const char* PercentileMethodName(PercentileMethod m);  // "linear", "nearest_rank"

enum class SloMetric { kTtft, kItl, kE2e };
const char* SloMetricName(SloMetric m);  // "ttft", "itl", "e2e"

// How requests arrive. Closed loop: a fixed number of sessions, each sending its next request when
// the previous one ends (the load level is the concurrency C). Open loop: requests are sent on a
// seeded schedule at a rate, whether or not earlier ones have finished (the load level L stands for
// the rate L * rate_step_rps), with constant, exponential (Poisson) or gamma-distributed gaps.
// Sessions: C conversations at once, each of several turns; turn t + 1 resends the conversation so
// far (the earlier prompts and the text the server streamed back) after a think time, and a
// finished session's place goes to the next one (the load level is the concurrent sessions).
// Replay: open loop at a trace's own rhythm, a mixed row's traffic file in its order, each request
// at its recorded arrival offset, the whole trace sped up or slowed down so that its mean rate is
// the level's (level * rate_step_rps).
enum class ArrivalKind { kClosedLoop, kConstant, kPoisson, kGamma, kSessions, kReplay };
// "closed_loop", "constant", "poisson", "gamma", "sessions", "replay"
const char* ArrivalKindName(ArrivalKind k);
// The kind named `name` (ArrivalKindName); nullopt for any other text.
std::optional<ArrivalKind> ParseArrivalKind(std::string_view name);

// A place in a row file, 1-based; 0 when the row was not read from a file.
struct SourceMark {
  int line = 0;
  int column = 0;
};

// Where identity.server_expect was written: what the reader keeps so that the check of its keys
// against the limits the engine reports (targets/row_limits.h) can name file:line:column.
struct ServerExpectSource {
  struct Key {
    SourceMark key, value;
    bool quoted = false;  // written as a quoted string ("8"): text, never a count or a flag
  };
  SourceMark at;  // the server_expect key itself, where a missing limit is reported
  std::map<std::string, Key> keys;
};

struct Identity {
  Engine engine = Engine::kSim;
  std::string image;  // "repo@sha256:<64 hex>" for real engines; empty for sim
  std::string model;
  std::string model_revision;  // 40-hex snapshot for real engines
  std::string served_model_name;
  std::string hardware;
  std::string driver;
  // Asserted against the server's own info endpoints before any load, under the engine's own
  // names (targets/engine_limits.h: llama.cpp total_slots and n_ctx, SGLang max_running_requests,
  // ...). The row reader keeps the YAML scalars as written; CheckServerExpect()
  // (targets/row_limits.h) refuses a key the engine does not report and canonicalises the values
  // ("true", "4096").
  std::map<std::string, std::string> server_expect;
  ServerExpectSource server_expect_source;
  // Simulator rows only.
  std::string sim_profile;  // absolute path, resolved against the row file's folder
  double time_scale = 1.0;  // virtual seconds per wall second (1 for real engines)
  // The real engine whose endpoints, shapes and adapter the simulator stands in for (its dialect);
  // server_expect then uses that engine's names.
  Engine sim_dialect = Engine::kSglang;
  // sim_variations: varied: every request draws its framing among every benign variation real
  // servers are known to send (sim/variations.h), seeded by the row's first seed; dialect (the
  // default): the framing of the dialect's own engine.
  bool sim_varied = false;
};

struct Sampling {
  double temperature = 0.0;
  bool ignore_eos = true;
  std::optional<double> top_p;
};

// The open-loop part of a workload (rows whose arrival kind is not closed_loop). The measured
// interval is declared under `measured:` in the file; it lives here because it is a property of the
// schedule.
struct OpenLoop {
  double rate_step_rps = 0;  // the resolution of a rate claim; a trial's rate is level * step
  double cv = 1;  // inter-arrival coefficient of variation (constant 0, poisson 1, gamma declared)
  // The measured interval after the ramp, in the server's (virtual) seconds or as a request count:
  // exactly one of these two is set.
  std::optional<double> duration_s;
  std::optional<int> requests;
  // Requests scheduled in the first ramp_s (virtual) seconds are sent but excluded from the
  // metrics, like warm-ups.
  double ramp_s = 0;
};

// The stability gates of an open-loop trial (open-loop rows only; these are the defaults). The
// measured interval is cut into thirds; "first" and "last" below are its first and last third.
struct Stability {
  // The queue is bounded: the last third's mean depth <= the first third's * (1 + pct / 100) +
  // queue_slack (requests).
  double queue_growth_pct = 25;
  double queue_slack = 2;
  // Latency is stationary: each gated percentile over the last third <= factor * the first's.
  double latency_drift_factor = 1.5;
  // The schedule held: the p99 of send lateness (actual - intended send time) stays below this,
  // else the trial could not run (the client fell behind); it is never a pass.
  double max_send_lateness_ms = 2;
};

struct Workload {
  int64_t input_tokens = 0;
  int64_t input_stddev_tokens = 0;
  int64_t output_tokens = 0;
  int64_t output_stddev_tokens = 0;
  Sampling sampling;
  ArrivalKind arrival_kind = ArrivalKind::kClosedLoop;
  OpenLoop open_loop;  // filled for open-loop kinds only
  std::string prompt_corpus = "synthetic";
};

// A prefix row (`prefix:`): a share of the measured prompts begins with one of a group's shared
// texts, each primed once after the flush, so the hit ratio follows from the row. The rest of
// every prompt (and every prompt outside the groups) is unique as usual.
struct PrefixGroup {
  int prefixes = 1;    // distinct shared texts in the group, used in turn by its prompts
  int64_t tokens = 0;  // each text's length in the server's tokens (message tokens)
  double share = 0;    // of the measured prompts, in (0, 1]; all groups' shares sum to <= 1
};
struct PrefixReuse {
  std::vector<PrefixGroup> groups;
  ReuseTolerance tolerance;
  int Prefixes() const;  // all groups' prefixes: the priming requests of a trial
};

// One turn of a session's shape: the new user message, the output asked for, and the think (tool)
// time before the next turn, in the server's (virtual) seconds.
struct TurnShape {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double think_s = 0;
  int line = 0;  // a trajectory file's line (0: synthetic)
  // A recorded turn's whole prompt and its chained blocks of `block_tokens` (trajectory.h); a row
  // with sessions.prefix_blocks sends exactly that prompt, built from the blocks (FitTrajectory
  // makes input_tokens the whole prompt and the blocks the row's).
  std::optional<int64_t> prompt_tokens;
  int64_t block_tokens = 0;
  std::vector<int64_t> block_ids;
};

// A trajectory's sub-agent: the path it runs beside (an earlier one) and when it starts, in the
// server's seconds after that path's first send; parent -1 for a top-level path.
struct PathStart {
  int parent = -1;
  double after_s = 0;
};

// A session row (`arrival: {kind: sessions}` with `sessions:`). Synthetic sessions: turn 1 sends
// workload.input_tokens, later turns user_tokens, each asks workload.output_tokens, and the think
// times are drawn (constant, or exponential with the mean). A trajectory file gives the shapes
// instead, one session per trajectory, cycled (rows/traffic/README.md).
struct Sessions {
  int turns = 0;
  int64_t user_tokens = 0;
  std::string think = "constant";  // "constant" | "exponential"
  double think_mean_s = 0;
  std::string trajectory;                     // absolute path; "" = synthetic
  std::vector<std::vector<TurnShape>> paths;  // the trajectory file's sessions, in file order
  std::vector<PathStart> starts;              // by path: a sub-agent's parent and start
  ReuseTolerance tolerance;
  // sessions.scale: a recorded trajectory fitted to the server. Every turn's lengths are multiplied
  // by `tokens` (at least a token each), every delay and sub-agent start by `times`; a turn whose
  // prompt and output then exceed `context_tokens` is refused at load. `scaled_turns` counts the
  // turns the fit changed.
  double token_scale = 1, time_scale = 1;
  std::optional<int64_t> context_tokens;
  int scaled_turns = 0;
  // sessions.prefix_blocks: each turn sends its recorded whole prompt, built from its chained
  // blocks, instead of the conversation so far (prefix_blocks.h): `merge` of the trace's blocks
  // make one block of the row (`block_tokens`, fitted), the rest of the prompt a last block of its
  // own. Reuse is then the trace's own (compaction, sub-agents sharing a system prompt) and every
  // body is the plan's.
  struct Blocks {
    int merge = 1;
    int64_t block_tokens = 0;
  };
  std::optional<Blocks> blocks;
  // sessions.gate_turns: every turn index is a class of its own (every), or turn 1 and all later
  // turns together (first_and_later: sessions of dozens of turns hold no tail per index).
  bool gate_every_turn = true;
  int MaxTurns() const;
};

inline constexpr const char* kLaterTurnsClass = "later";

struct CachePolicy {
  bool prefix_cache = true;  // "enabled" | "disabled" in the file
  bool flush_before_trial = true;
  bool verify_cold = true;
};

struct Warmup {
  int requests = 8;
  int concurrency = 1;
};

// The measured sample of a closed-loop row (an open-loop row declares its interval in
// Workload::open_loop instead and leaves these at their defaults).
struct Measured {
  int min_requests = 64;
  int per_concurrency = 4;
  // max(min_requests, per_concurrency * C): the seed's sample size rule.
  int RequestsAt(int concurrency) const {
    int scaled = per_concurrency * concurrency;
    return scaled > min_requests ? scaled : min_requests;
  }
};

struct SloGate {
  SloMetric metric = SloMetric::kTtft;
  double percentile = 95;  // in (0, 100): p100 is the max, not a tail percentile
  double below_ms = 0;     // strictly below: a value equal to it fails
};

// A further contract judged on the same trials as the row's own `slo` (slo_tiers in the file).
// Tier 0 is the row's `slo`, named kPrimaryTier; every tier's name is unique in the row.
struct SloTier {
  std::string name;  // [a-z][a-z0-9_]*
  std::vector<SloGate> slo;
};
inline constexpr const char* kPrimaryTier = "primary";

struct Gate {
  bool enabled = true;
  std::string reason_off;  // required when a row switches a gate off
};

struct Correctness {
  Gate status_200;
  Gate no_cancellations;
  Gate exact_completion_tokens;
  Gate finish_reason;
  std::string finish_reason_value = "length";
  Gate nonempty_deltas;
  Gate unique_prompts;
  Gate unique_outputs;
  Gate warmup_disjoint;
  // The counter proves the text: the server's own tokenizer re-counts each measured stream's
  // text after the load; |recount - usage.completion_tokens| may be at most this share of it.
  // Retokenizing decoded text is not exact: a tokenizer merges across the sampled tokens'
  // boundaries, so the re-count runs short (the capacity post saw 979 for 1,024 generated, 4.4%).
  // 10% leaves that drift more than twice its room, and a stream carrying half the text its usage
  // claims (50% short) still fails five times over.
  Gate text_recount;
  double text_recount_tolerance_pct = 10;
  // usage.prompt_tokens == planned message tokens + the template overhead measured on the
  // server, within this many tokens (tokenization at the message's edges: the post's 8,243 to
  // 8,246 for 8,192).
  Gate prompt_tokens;
  int64_t prompt_tokens_tolerance = 4;
  // Every chunk's "model" is the row's served_model_name.
  Gate model_name;
  // The first measured stream that can no longer pass a gate (error status or frame, cut
  // connection, a stall longer than stall_timeout_s, a wrong model) ends the trial at once.
  Gate fail_fast;
  double stall_timeout_s = 60;  // in the server's (virtual) seconds
};

struct Trials {
  int count = 3;
  double quiet_period_s = 15;
  std::vector<uint64_t> seeds;  // one per trial; the loader derives missing ones deterministically
};

struct Baseline {
  std::optional<double> ttft_p50_ms;
  std::optional<double> itl_p50_ms;
  double tolerance_pct = 15;
  // The server's prompt tokens at C = 1 (usage.prompt_tokens, template included), when the
  // source gives them: calibration reads the template's overhead from it (capq predict).
  std::optional<int64_t> prompt_tokens;
};

struct Expect {
  std::optional<int> cmax;  // C = cmax passes every trial, cmax + 1 fails every trial (closed loop)
  // Open loop: the rate rmax_rps passes every trial, rmax_rps + rate_step_rps fails every trial; a
  // positive multiple of workload.open_loop.rate_step_rps.
  std::optional<double> rmax_rps;
  std::optional<Baseline> baseline;
};

struct Provenance {
  std::string qualified_on;
  std::string source;
  std::string notes;
};

struct Row {
  std::string schema = "capq/row/v1";
  std::string id;
  std::string title;
  std::string family;       // the folder under rows/ (b70, sim): a ctest label
  std::string source_path;  // the file it was loaded from
  Identity identity;
  Workload workload;
  CachePolicy cache;
  Warmup warmup;
  Measured measured;
  Stability stability;  // open-loop rows only
  std::vector<SloGate> slo;
  std::vector<SloTier> slo_tiers;  // the further tiers, in the file's order (closed loop only)
  PercentileMethod percentile_method = PercentileMethod::kLinear;
  Correctness correctness;
  Trials trials;
  double request_timeout_s = 21600;  // per request, in the server's (virtual) seconds
  // The one-sided confidence the pass side of a proven boundary must reach, every gate of the
  // row's own slo (measurement/certainty.h PassConfidence over that side's trials together), in
  // (0, 1): the qualification adds trials at the boundary until it does, one fails, or the side
  // holds the most trials a side may have. nullopt: the confidence is stated, not required.
  std::optional<double> confidence;
  Expect expect;
  Provenance provenance;
  // A mixed-class replay (closed loop only): requests take whole samples of the traffic file's
  // classes in the declared shares (mix.h); every SLO gate holds globally and per class.
  std::optional<Mix> mix;
  std::optional<PrefixReuse> prefix;  // a prefix row
  std::optional<Sessions> sessions;   // a session row (arrival kind sessions)

  // An arrival schedule at a rate (constant, poisson, gamma): the load level is a rate.
  bool open_loop() const {
    return workload.arrival_kind != ArrivalKind::kClosedLoop &&
           workload.arrival_kind != ArrivalKind::kSessions;
  }
  // The row declares cache reuse (prefix groups, session histories, or a trace's prefix blocks):
  // its measured requests are warm by design, and the served cached tokens are gated against what
  // it declares.
  bool reuse() const { return prefix || sessions || (mix && mix->blocks); }
  // How far what the server serves may stray from that; a reuse row's only.
  const ReuseTolerance& reuse_tolerance() const;
};

// The classes every SLO gate also holds over: a mixed row's traffic classes, a session row's turn
// indices ("turn1", "turn2", ...); empty otherwise.
std::vector<std::string> GateClasses(const Row& row);
// Whether the row's measured requests are a recorded trace's samples as fitted, so a trial records
// what it sent for the report to hold beside the trace: a mix, or a trajectory whose turns are sent
// as whole recorded prompts (sessions.prefix_blocks).
bool SendsTraceSamples(const Row& row);

std::string TurnClass(int turn);  // "turn3"
// The class a session row gates turn `turn` in: TurnClass, or "later" past turn 1 when the row
// gates first and later turns.
std::string TurnClass(const Sessions& s, int turn);

// Every tier of the row: {kPrimaryTier, row.slo}, then row.slo_tiers.
std::vector<SloTier> AllTiers(const Row& row);

// RateAtLevel is level * rate_step_rps (0 for a closed-loop row); capq/model/load_level.h says
// what a level is.
double RateAtLevel(const Row& row, LoadLevel level);
// The level of `rate_rps` on an open-loop row: rate / rate_step_rps rounded to the nearest integer
// (0 for a closed-loop row). LevelAtRate(row, RateAtLevel(row, l)) == l.
LoadLevel LevelAtRate(const Row& row, double rate_rps);

LoadScale LoadScaleOf(const Row& row);
// LoadScaleOf(row).Label(level): "C=6", "R=1.25 rps".
std::string LoadLabel(const Row& row, LoadLevel level);

}  // namespace capq
