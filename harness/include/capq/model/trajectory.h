// Trajectory files (capq/trajectory/v1, rows/traffic/README.md): agent sessions, one turn a line,
// as written by hand or imported from a recorded trace (`capq traffic import --format
// weka|tracelab`). Pure: the caller reads and writes the file; errors name the file, the line and
// the field.
//
// A session's turns come on consecutive lines numbered 1, 2, ... Besides the turn's new tokens,
// its output and the delay after it, a turn may keep what a recorded trace knew: the whole prompt,
// the tokens the recorded server served from its cache, when it was sent, what the delay after
// it was spent on, and its prompt's chained prefix blocks. A session may be a sub-agent: it names
// its parent (an earlier session of the file) and starts `start_offset_s` after the parent's
// start, running beside it. Files without these fields read as they always did.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "capq/status.h"

namespace capq {

inline constexpr const char* kTrajectorySchema = "capq/trajectory/v1";

// What the delay after a turn was spent on: a tool running (the next turn's new input is tool
// results) or the user (it holds a user message). Written "tool" / "user"; absent = unknown.
enum class DelayCause { kUnknown, kTool, kUser };

struct TrajectoryTurn {
  // The turn's new tokens: on turn 1 the whole prompt, later what the prompt adds to the
  // conversation so far (a session row resends the history on top of it).
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  // Seconds between this turn's answer and the next turn's send (`tool_delay_s`).
  double delay_s = 0;
  DelayCause delay_cause = DelayCause::kUnknown;
  // The whole prompt as the trace recorded it, history included.
  std::optional<int64_t> prompt_tokens;
  // The prompt's tokens the recorded server read from its prefix cache.
  std::optional<int64_t> cached_tokens;
  // When the turn was sent, seconds from its session's start.
  std::optional<double> offset_s;
  // The prompt's blocks of `block_tokens` tokens in order, chained: equal leading ids are a
  // shared prefix, within a session and across the file's sessions. Empty when unknown.
  int64_t block_tokens = 0;
  std::vector<int64_t> block_ids;
  int line = 0;  // 1-based line in its file (0: not read from a file)

  // Equal content; `line` says where a turn was read, so it is left out.
  bool operator==(const TrajectoryTurn& o) const;
};

struct TrajectorySession {
  std::string name;
  std::string parent;                    // a sub-agent's parent session; "" for a top-level one
  std::optional<double> start_offset_s;  // a sub-agent's start, seconds after its parent's start
  std::string agent_type;                // the sub-agent's kind as the trace names it ("Explore")
  std::vector<TrajectoryTurn> turns;

  bool operator==(const TrajectorySession& o) const;
};

// The file's sessions in file order. A sub-agent's parent comes earlier in the file (the nearest
// earlier session of that name).
Result<std::vector<TrajectorySession>> ParseTrajectorySessions(const std::string& text,
                                                               const std::string& file);
// One line a turn, newline-terminated; ParseTrajectorySessions reads it back equal (lines aside).
std::string TrajectoryToJsonLines(const std::vector<TrajectorySession>& sessions);

// True when the text's first non-blank line is a capq/trajectory/v1 turn.
bool LooksLikeTrajectory(const std::string& text);

}  // namespace capq
