// Early decision: a trial stops the moment no completion of its unfinished requests could pass a
// latency gate (certainty.h's MissIsCertain), so a failing load level costs the time its verdict
// took to become certain, not the time its last request took.
//
// The load generator's recorder keeps what it knows of each measured request (LiveLatency) and
// asks the rule on a tick; the trial writes the decision's moment into the evidence, and
// `capq validate` rebuilds the same view from the raw records at that moment (LiveLatencyAt) and
// asks the same rule. The two views agree exactly: a first token counts as known when the event
// that carried it was read by that moment, a send when it was stamped by then.
//
// Which gates decide: TTFT and E2E, whose value grows while a request waits. ITL gates never decide
// (a waiting request bounds nothing about its token gaps); neither do open-loop rows (their
// stability gates judge the whole measured interval) nor rows with SLO tiers (a looser tier may
// still pass the load level the primary gate failed).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "capq/clock.h"
#include "capq/measurement/decode.h"
#include "capq/model/row.h"

namespace capq {

// What is known of one measured request at some moment: 0 = not yet.
struct LiveLatency {
  MonoNs send_ns = 0;              // its actual send
  MonoNs first_token_ns = 0;       // the stamp of its first text (what its TTFT counts to)
  MonoNs first_token_read_ns = 0;  // when the load generator read that text
  MonoNs done_ns = 0;              // it completed with status 200: what its E2E counts to
  MonoNs end_ns = 0;               // when it ended in any way (a failed one carries no E2E)
  bool ended = false;

  // What of it the load generator had read by `now`: a view assembled from several loops' reads
  // may hold a first text or an end one loop read after another's `now`.
  LiveLatency SeenBy(MonoNs now) const;
};

struct EarlyDecisionRules {
  bool enabled = false;
  std::string off_reason;      // why not, when not: "--full-trials", "the row is open loop", ...
  std::vector<SloGate> gates;  // the row's TTFT and E2E gates
  PercentileMethod method = PercentileMethod::kLinear;
  double time_scale = 1;  // virtual seconds per wall second: values are compared in the row's ms
  // No decision before this many measured streams completed whole: a failing level's streams are
  // proven correct too (a broken stream is no SLO result), and a decision made before any stream
  // ended would leave the correctness gates nothing to judge.
  int64_t min_completed = 1;
};
// `level`: the trial's concurrency (or sessions); at least that many streams complete first, so
// that every slot's first stream is checked.
EarlyDecisionRules EarlyDecisionRulesFor(const Row& row, int level, bool full_trials);

struct EarlyDecision {
  SloGate gate;
  double lowest_reachable_ms = 0;  // the least the gate's percentile can still end at
  int64_t measured = 0;            // the measured requests of the trial
  int64_t finished = 0;            // of them ended by the decision
  int64_t waiting = 0;             // in flight with no value yet, counted at their wait so far
  int64_t over = 0;                // values known or waited at or over the bound
  MonoNs at_ns = 0;                // the moment of the decision
  double after_s = 0;              // seconds into the measured phase (the row's seconds)
  // "decided early: p95 ttft cannot end below 2500.0 ms (at least 2731.2 ms): 5 of 64 at or over
  // the bound, 27 finished and 4 waiting, 6.1 s into the measured phase"
  std::string Reason() const;
};

// The gate that can no longer pass, first in the row's order; nullopt while every gate may.
// `measured` holds every measured request of the trial; `measured_start_ns` the phase's start.
std::optional<EarlyDecision> DecideEarly(const EarlyDecisionRules& rules,
                                         const std::vector<LiveLatency>& measured, MonoNs now_ns,
                                         MonoNs measured_start_ns);

// What the decoded streams say was known at `at_ns`, request by request (see the header's note).
std::vector<LiveLatency> LiveLatencyAt(const std::vector<RequestResult>& measured, MonoNs at_ns);

// The harness's mark on what a decided trial cut or never sent (RawRecord::cancelled_by_harness).
inline constexpr const char* kDecidedEarlyCut = "early decision: the verdict was already certain";

nlohmann::json EarlyDecisionToJson(const EarlyDecision& d);
EarlyDecision EarlyDecisionFromJson(const nlohmann::json& j);

}  // namespace capq
