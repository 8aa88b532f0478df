// The trial plan: everything one trial will send, decided before any load
// (docs/trial-and-artifacts.md).
//
// Row x C x trial -> seed -> warm-up prompts and measured prompts (one generator, disjoint index
// ranges, so the sets are disjoint and no two prompts share a first token) -> request bodies that
// carry every sampling parameter explicitly. Pure: the only outside input is the optional
// TokenCounter (the server's tokenizer), passed in by the caller.
//
// For an open-loop row the level L (in the place of C) stands for the rate L * rate_step_rps, and
// the plan adds the schedule (arrival.h): `measured` holds the ramp requests first ("r0", "r1",
// ...: sent on schedule, excluded from the metrics like warm-ups) and then the measured ones ("m0",
// ...), with send_offsets_ns[i] the intended send time of measured[i]. Warm-ups are unchanged:
// row.warmup at warmup.concurrency, before the schedule starts.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "capq/model/prompts.h"
#include "capq/model/qualify_phase.h"
#include "capq/model/row.h"
#include "capq/status.h"

namespace capq {

inline constexpr const char* kPlanSchema = "capq/plan/v1";

struct PlanRequest {
  std::string id;  // "w0".."w7" (warm-up), "r0".. (open-loop ramp), "m0".."m63" (measured)
  bool warmup = false;
  bool ramp = false;  // open loop: sent on schedule before the measured interval, not measured
  // Position in its phase's list (warmup or measured; in `measured` the ramp requests come first,
  // so "m0" of a plan with 3 ramp requests has index 3 and its offset is send_offsets_ns[3]).
  int index = 0;
  Prompt prompt;
  int64_t max_tokens = 0;  // completion tokens asked for (== the row's output unless stddev)
  std::string body;        // the JSON request body, exactly as sent (no key: keys go in headers)
  // The class its gates also hold over (row.h GateClasses): a mixed row's traffic class, a session
  // row's turn ("turn2"); "" otherwise. Written as "class".
  std::string traffic_class;
  // A prefix row: the shared prefix this prompt begins with (an index into the row's prefixes,
  // reuse.h), or -1; `prime`: the request that puts prefix `prefix` in the cache after the flush
  // ("p0", ...: sent after the warm-ups, in the warm-up list, never measured).
  int prefix = -1;
  bool prime = false;
  // The cached prompt tokens the row declares for it: its prefix's message tokens (a prefix row's
  // measured request), 0 for a unique prompt; unset where it follows from the stream (a session's
  // later turn: the previous turn's prompt and output).
  std::optional<int64_t> declared_cached_tokens;
  // A session row: its session (0-based, in start order) and turn (1-based), and the think time
  // before it is sent, in the server's (virtual) seconds after the previous turn's answer. A later
  // turn's body is built when it is sent (the conversation so far): `body` holds turn 1's only.
  int session = -1;
  int turn = 0;
  double think_s = 0;
  // A sub-agent's first turn: the session it runs beside (an earlier one) and its start, in the
  // server's seconds after that session's first send; -1 for a top-level session.
  int parent_session = -1;
  double start_after_s = 0;
};

struct TrialPlan {
  std::string row_id;
  std::string engine;
  LoadLevel level = 1;
  int trial_index = 1;  // 1-based
  uint64_t seed = 0;
  QualifyPhase phase = QualifyPhase::kConfirm;
  // The prompt corpus: its generator seed mixes the trial seed with the phase and level, so
  // no two trials of one qualification (baseline, every probe, every confirmation at every C) and
  // no two capacity tests of one row send the same prompt, while the same (row, phase, C, trial)
  // always yields the same prompts. A flush that leaves prompts cached can then only show as
  // cached tokens, never as a faster trial.
  uint64_t corpus_seed = 0;
  std::string corpus_id;  // "confirm/c7/s202": how the corpus was chosen, for the report
  // "tokenize": lengths exact in the server's tokens; "usage_prompt_tokens": no tokenize endpoint,
  // tokens per word fitted from the first warm-ups' usage.prompt_tokens (lengths approximate);
  // "word_count": neither, a word was taken as a token. The server's prompt_tokens range in the
  // metrics is the authority on input length in every case.
  std::string calibration;
  std::string calibration_note;
  int warmup_concurrency = 1;
  // row.measured.RequestsAt(C); for an open-loop row the measured requests after the ramp.
  int expected_measured = 0;
  // Lead words skipped because their first token was already taken ("Money: token 3094, as
  // Moment"), and how the first tokens were checked; empty when no check was possible.
  std::vector<std::string> skipped_leads;
  std::string first_token_check;
  std::vector<PlanRequest> warmup, measured;

  // The arrival model: the row's kind. Everything below is for open-loop plans
  // only (zero or empty for closed_loop).
  ArrivalKind arrival = ArrivalKind::kClosedLoop;
  double rate_rps = 0;         // RateAtLevel(row, level)
  double arrival_cv = 0;       // the gaps' coefficient of variation (constant 0, poisson 1)
  uint64_t schedule_seed = 0;  // ScheduleSeed(seed, phase, level)
  int ramp_requests = 0;       // the first ramp_requests entries of `measured`
  // Intended send offsets in the server's (virtual) ns from the schedule's start, parallel to
  // `measured` (ramp included), non-decreasing.
  std::vector<int64_t> send_offsets_ns;
  // The measured interval of the schedule, [measured_start_ns, measured_end_ns): from ramp_s to
  // ramp_s + duration_s for a duration row; for a requests row it ends 1 ns after the last
  // measured offset.
  int64_t measured_start_ns = 0;
  int64_t measured_end_ns = 0;

  bool open_loop() const {
    return arrival != ArrivalKind::kClosedLoop && arrival != ArrivalKind::kSessions;
  }
  bool sessions() const { return arrival == ArrivalKind::kSessions; }
};

// The server's token id that starts a prompt beginning with `lead_word`, tokenized as the server
// prefills it (inside the chat template): two prompts with the same one share a cacheable prefix
// beyond the template's.
using FirstTokenFn = std::function<Result<int64_t>(const std::string& lead_word)>;

struct PlanInputs {
  LoadLevel level = 1;
  int trial_index = 1;           // 1-based
  std::optional<uint64_t> seed;  // overrides row.trials.seeds[trial_index - 1]
  QualifyPhase phase = QualifyPhase::kConfirm;
  const TokenCounter* counter = nullptr;  // null: no tokenize endpoint
  // When set, prompts whose lead word would start with a token an earlier prompt of the trial
  // already starts with are skipped (distinct words can share a first sub-word token).
  const FirstTokenFn* first_token = nullptr;
};

// The seed of a trial: `override` when set, else row.trials.seeds[trial_index - 1]; an error when
// the row has no seed for that trial.
Result<uint64_t> TrialSeed(const Row& row, int trial_index, std::optional<uint64_t> override_seed);

Result<TrialPlan> MakeTrialPlan(const Row& row, const PlanInputs& in);

// The generator seed of the corpus of a trial with `seed` in `phase` at `level`.
uint64_t CorpusSeed(uint64_t seed, QualifyPhase phase, LoadLevel level);

// The seed of an open-loop trial's arrival schedule: like CorpusSeed a function of (seed, phase,
// level), but a different stream, so that the schedule and the prompts are drawn independently.
uint64_t ScheduleSeed(uint64_t seed, QualifyPhase phase, LoadLevel level);

// The most requests one open-loop plan may schedule (ramp and measured together).
inline constexpr int64_t kMaxScheduledRequests = 1'000'000;

// Rebuilds one request's prompt with `words` words (same generator index, so it stays unique and
// disjoint) and its body; message_tokens = `estimated_tokens`, calibrated = false. Used to
// calibrate from the server's usage.prompt_tokens when it has no tokenize endpoint.
void RewordRequest(const Row& row, const TrialPlan& plan, int64_t words, int64_t estimated_tokens,
                   PlanRequest* r);

// Whether request `r`'s body is built when it is sent (a session's later turn resending the
// conversation so far) rather than planned: then `body` is empty and its prompt tokens follow from
// the stream. A block session's turns are whole planned prompts.
bool BuiltWhenSent(const Row& row, const PlanRequest& r);

// A session turn's body: the conversation so far, as the user and assistant messages alternate
// (`turns` user prompts, `answers` the streamed text of every earlier turn: one fewer), with the
// sampling of ChatRequestBody.
std::string SessionTurnBody(const Row& row, const std::vector<std::string>& prompts,
                            const std::vector<std::string>& answers, int64_t max_tokens,
                            uint64_t seed);

// A streaming chat completion body: model, one user message, stream + include_usage, temperature,
// top_p when the row sets it, max_tokens and max_completion_tokens, ignore_eos, seed.
std::string ChatRequestBody(const Row& row, const std::string& prompt, int64_t max_tokens,
                            uint64_t seed);

// plan.json (schema capq/plan/v1). Prompts are written in full with their SHA-256. An open-loop
// plan adds an "arrival" object (kind, rate_rps, cv, schedule_seed, ramp_requests,
// measured_start_ns, measured_end_ns) and, on each measured entry, "ramp" and "send_offset_ns"; a
// closed-loop plan is written exactly as before, and a plan without "arrival" loads as closed loop.
nlohmann::json PlanToJson(const TrialPlan& plan);
Result<TrialPlan> PlanFromJson(const nlohmann::json& j);

}  // namespace capq
