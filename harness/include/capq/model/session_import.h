// Recorded agent sessions read as capq trajectories (capq/model/trajectory.h,
// rows/traffic/README.md): each format exactly as its publisher documents it. Pure: the caller
// reads the files; errors name the file and the JSON path (WEKA) or the line (TraceLab) and the
// field.
//
//   weka      callanjfox/kv-cache-tester traces (docs/trace_replay_tester.md): one JSON object a
//             file, {"id", "block_size", "hash_id_scope", "requests": [...]}; a request {"t": s
//             from the session's start, "type": "n" | "s", "in", "out", "hash_ids": full blocks
//             of block_size tokens, chained, "input_types", "stop", "api_time", "think_time"}; a
//             sub-agent {"t", "type": "subagent", "agent_id", "subagent_type", "requests"}, its
//             inner t counted from its own start, running beside its parent.
//   tracelab  uw-syfi/TraceLab round traces (example_sessions/derived/README.md): JSONL, one LLM
//             round a line, {"session_id", "round_index", "input_tokens_total", "prefix_tokens"
//             (cache-read), "newly_append_tokens", "output_tokens", "timing_events":
//             [{"event_type", "timestamp": ISO-8601 UTC}], ...}; no block hashes, no sub-agents.
//
// Each session's turns keep the whole prompt (prompt_tokens), the output, the send time from the
// session's start, and the delay after the turn with its cause: "tool" when the next turn's new
// input is tool results only, "user" when it holds a user message. input_tokens is turn 1's whole
// prompt and, later, what the prompt adds beyond the previous turn's (WEKA: beyond the leading
// blocks the two share; TraceLab: newly_append_tokens), at least 1.
#pragma once

#include <string>
#include <vector>

#include "capq/model/trace_import.h"
#include "capq/model/trajectory.h"
#include "capq/status.h"

namespace capq {

// One file's sessions, a parent before its sub-agents. `local_block_ids`: the file's block ids
// mean something only within the file (WEKA's hash_id_scope "local"), so equal ids in another
// file are other blocks.
struct ImportedSessions {
  std::string file;
  std::vector<TrajectorySession> sessions;
  bool local_block_ids = false;
};

// WEKA: a top-level session named by the trace's id; its sub-agents "<parent>/<agent_id>", in
// the order they appear (nested ones after their parent). The delay after a turn is the next
// turn's think_time (without it, the gap between their t less this turn's api_time).
Result<ImportedSessions> ImportWeka(const std::string& text, const std::string& file);

// TraceLab: one session per session_id, in order of first appearance, its rounds in round_index
// order. A round is sent at its latest input event (user_message or tool_result; the first event
// when it has none) and answered at its latest event; the delay after it runs to the next
// round's send (0 if the events overlap). cached_tokens is prefix_tokens.
Result<ImportedSessions> ImportTraceLab(const std::string& text, const std::string& file);

// `format` must be weka or tracelab (IsSessionFormat).
Result<ImportedSessions> ImportSessionTrace(TraceFormat format, const std::string& text,
                                            const std::string& file);

// The files' sessions in order, in one block-id space: a file with local ids has them shifted
// past every id of the files before it and of every file with shared ids, so that equal ids
// anywhere in the result are the same block. Session names must not repeat.
Result<std::vector<TrajectorySession>> JoinSessionFiles(std::vector<ImportedSessions> files);

}  // namespace capq
