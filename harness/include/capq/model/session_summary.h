// What a trajectory file's sessions offer a replay, in figures: how many sessions, sub-agents and
// turns, the paired prompt and output lengths per turn, the delays between turns by cause, and how
// much of the prompts a prefix cache could reuse. Pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "capq/model/trajectory.h"

namespace capq {

// Nearest-rank percentiles of a set of values; all 0 when it is empty.
struct Spread {
  int count = 0;
  double p50 = 0, p95 = 0, p99 = 0, max = 0;
};
Spread SpreadOf(std::vector<double> values);

struct SessionSummary {
  int sessions = 0;   // top-level
  int subagents = 0;  // sessions with a parent
  int turns = 0;
  // Per turn: the whole prompt (prompt_tokens, or else the history a session row resends plus the
  // turn's new tokens) and the output, taken together.
  Spread prompt_tokens, output_tokens;
  // The delays after turns but a session's last, by cause; an unknown cause counts as a tool's
  // (tool_delay_s was always a tool call's time).
  Spread user_delay_s, tool_delay_s;
  // Block references over all turns, and how many name a block some turn named before: what a
  // prefix cache keeping every block could reuse. Per top-level session with its sub-agents: the
  // least and most reuse among those with blocks.
  int64_t block_references = 0, blocks_seen_before = 0;
  double session_reuse_min = 0, session_reuse_max = 0;
  // Over turns that give cached_tokens: their prompts' tokens and the cached ones.
  int64_t cached_prompt_tokens = 0, cached_tokens = 0;
};
SessionSummary SummarizeSessions(const std::vector<TrajectorySession>& sessions);
std::string SessionSummaryText(const SessionSummary& s);

}  // namespace capq
