// Cache-reuse workloads as pure functions: the sessions a trial runs from trajectory files, the
// think times between turns, and which measured prompts of a prefix row share which prefix.
//
// Trajectory files (capq/model/trajectory.h, rows/traffic/README.md) are JSON lines of schema
// capq/trajectory/v1, one turn a line. A session row takes from each turn its new tokens
// (input_tokens: the history is resent on top of it), its output and tool_delay_s, the time
// after the turn's answer before the next turn is sent. Errors name the file and the line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "capq/model/row.h"
#include "capq/model/trajectory.h"
#include "capq/status.h"

namespace capq {

// `starts`, when given, receives each path's sub-agent link (Sessions::starts).
Result<std::vector<std::vector<TurnShape>>> ParseTrajectory(
    const std::string& text, const std::string& file, std::vector<PathStart>* starts = nullptr);
Result<std::vector<std::vector<TurnShape>>> LoadTrajectory(
    const std::string& path, std::vector<PathStart>* starts = nullptr);

// The sessions a session-row trial at `concurrency` runs, in start order, each its turns' shapes:
// at least `concurrency` top-level sessions, and enough that their turns reach
// row.measured.RequestsAt(concurrency). A trajectory's top-level paths are taken in file order,
// cycled, each followed by its sub-agents (and theirs); `starts`, when given, receives each
// session's link to the session it runs beside, as an index into the result. Synthetic think
// times are drawn from `seed` (constant: the mean; exponential: seeded draws of that mean); the
// last turn's think time is 0.
std::vector<std::vector<TurnShape>> SessionShapes(const Row& row, int concurrency, uint64_t seed,
                                                  std::vector<PathStart>* starts = nullptr);

// How many of those sessions reach turn t (index t - 1), for t = 1 .. the longest session.
std::vector<int> TurnCounts(const std::vector<std::vector<TurnShape>>& sessions);

// A prefix row's measured prompts: for each of `n`, the prefix it starts with (an index into the
// row's prefixes, group by group in declared order) or -1. Group g holds round(share * n)
// prompts (largest remainders, so the counts sum exactly), shared out among its prefixes; every
// prefix and the unshared prompts are spread evenly over the n (a smooth weighted round robin
// started at a seeded place).
std::vector<int> AssignPrefixes(const PrefixReuse& prefix, int n, uint64_t seed);
// The group of prefix `p` (an index as above).
const PrefixGroup& GroupOfPrefix(const PrefixReuse& prefix, int p);

// The reuse a row declares, in words: "2 prefixes of 768 tokens for 75% of prompts", "4 turns, +128
// tokens a turn, think exponential mean 1 s", "trajectories from agent_sessions.jsonl (3
// sessions)"; "" for a row without reuse.
std::string ReuseInWords(const Row& row);

}  // namespace capq
