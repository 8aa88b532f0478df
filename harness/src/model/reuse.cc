#include "capq/model/reuse.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "capq/file_io.h"
#include "capq/hash.h"

namespace capq {
namespace {

// A uniform draw in (0, 1] from a seeded hash of (seed, session, turn).
double Uniform01(uint64_t seed, int session, int turn) {
  uint64_t x = SplitMix64(seed ^ 0x7468696e6bULL);  // "think"
  x = SplitMix64(x ^ static_cast<uint64_t>(session));
  x = SplitMix64(x ^ static_cast<uint64_t>(turn));
  return (static_cast<double>(x >> 11) + 1.0) / 9007199254740992.0;
}

std::vector<TurnShape> SyntheticSession(const Row& row, int session, uint64_t seed) {
  const Sessions& s = *row.sessions;
  std::vector<TurnShape> turns(static_cast<size_t>(s.turns));
  for (int t = 0; t < s.turns; ++t) {
    TurnShape& shape = turns[static_cast<size_t>(t)];
    shape.input_tokens = t == 0 ? row.workload.input_tokens : s.user_tokens;
    shape.output_tokens = row.workload.output_tokens;
    if (t + 1 == s.turns) continue;
    shape.think_s = s.think == "exponential"
                        ? -std::log(Uniform01(seed, session, t + 1)) * s.think_mean_s
                        : s.think_mean_s;
  }
  return turns;
}

// Each session's sub-agent link: the nearest earlier session of its parent's name.
std::vector<PathStart> Starts(const std::vector<TrajectorySession>& sessions) {
  std::vector<PathStart> out(sessions.size());
  for (size_t i = 0; i < sessions.size(); ++i) {
    if (sessions[i].parent.empty()) continue;
    for (size_t j = i; j-- > 0;) {
      if (sessions[j].name != sessions[i].parent) continue;
      out[i] = {static_cast<int>(j), sessions[i].start_offset_s.value_or(0)};
      break;
    }
  }
  return out;
}

}  // namespace

Result<std::vector<std::vector<TurnShape>>> ParseTrajectory(const std::string& text,
                                                            const std::string& file,
                                                            std::vector<PathStart>* starts) {
  Result<std::vector<TrajectorySession>> sessions = ParseTrajectorySessions(text, file);
  if (!sessions.ok()) return sessions.status();
  if (starts) *starts = Starts(*sessions);
  std::vector<std::vector<TurnShape>> out;
  for (const TrajectorySession& s : *sessions) {
    out.emplace_back();
    for (const TrajectoryTurn& t : s.turns) {
      TurnShape& shape = out.back().emplace_back();
      shape.input_tokens = t.input_tokens;
      shape.output_tokens = t.output_tokens;
      shape.think_s = t.delay_s;
      shape.line = t.line;
      shape.prompt_tokens = t.prompt_tokens;
      shape.block_tokens = t.block_tokens;
      shape.block_ids = t.block_ids;
    }
    out.back().back().think_s = 0;  // nothing follows a session's last answer
  }
  return out;
}

Result<std::vector<std::vector<TurnShape>>> LoadTrajectory(const std::string& path,
                                                           std::vector<PathStart>* starts) {
  Result<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status().WithContext("the trajectory file");
  return ParseTrajectory(*text, path, starts);
}

namespace {

// Appends trajectory path `p` as a session beside session `parent` of `out` (-1: top-level), then
// its sub-agents beside it.
void AddPath(const Sessions& s, size_t p, int parent, std::vector<std::vector<TurnShape>>* out,
             std::vector<PathStart>* starts) {
  const int self = static_cast<int>(out->size());
  out->push_back(s.paths[p]);
  starts->push_back({parent, parent < 0 ? 0 : s.starts[p].after_s});
  for (size_t c = p + 1; c < s.starts.size(); ++c) {
    if (s.starts[c].parent == static_cast<int>(p)) AddPath(s, c, self, out, starts);
  }
}

}  // namespace

std::vector<std::vector<TurnShape>> SessionShapes(const Row& row, int concurrency, uint64_t seed,
                                                  std::vector<PathStart>* starts) {
  std::vector<std::vector<TurnShape>> out;
  std::vector<PathStart> links;
  if (!row.sessions) return out;
  const Sessions& s = *row.sessions;
  std::vector<size_t> tops;  // the trajectory's top-level paths
  for (size_t p = 0; p < s.paths.size(); ++p) {
    if (p >= s.starts.size() || s.starts[p].parent < 0) tops.push_back(p);
  }
  const int64_t want = row.measured.RequestsAt(concurrency);
  int64_t turns = 0;
  for (int k = 0; turns < want || k < concurrency; ++k) {
    const size_t before = out.size();
    if (tops.empty()) {
      out.push_back(SyntheticSession(row, k, seed));
      links.emplace_back();
    } else {
      AddPath(s, tops[static_cast<size_t>(k) % tops.size()], -1, &out, &links);
    }
    for (size_t i = before; i < out.size(); ++i) turns += static_cast<int64_t>(out[i].size());
  }
  if (starts) *starts = std::move(links);
  return out;
}

std::vector<int> TurnCounts(const std::vector<std::vector<TurnShape>>& sessions) {
  std::vector<int> counts;
  for (const auto& s : sessions) {
    if (counts.size() < s.size()) counts.resize(s.size(), 0);
    for (size_t t = 0; t < s.size(); ++t) ++counts[t];
  }
  return counts;
}

std::vector<int> AssignPrefixes(const PrefixReuse& prefix, int n, uint64_t seed) {
  // Largest remainders: floor(share * n) each, then one more to the largest fractions.
  const size_t g_n = prefix.groups.size();
  std::vector<int> count(g_n);
  std::vector<std::pair<double, size_t>> rest;
  int placed = 0;
  double total_share = 0;
  for (size_t g = 0; g < g_n; ++g) {
    const double exact = prefix.groups[g].share * n;
    count[g] = static_cast<int>(std::floor(exact));
    placed += count[g];
    total_share += prefix.groups[g].share;
    rest.emplace_back(exact - count[g], g);
  }
  std::stable_sort(rest.begin(), rest.end(), [](auto& a, auto& b) { return a.first > b.first; });
  const int grouped = std::min(n, static_cast<int>(std::llround(total_share * n)));
  for (size_t k = 0; placed < grouped && k < rest.size(); ++k, ++placed) ++count[rest[k].second];
  // One entry per prefix (its group's count shared out in turn) and one for the unshared prompts.
  std::vector<int> entry, weight;
  int first = 0;
  for (size_t g = 0; g < g_n; ++g) {
    const int k = prefix.groups[g].prefixes;
    for (int j = 0; j < k; ++j) {
      entry.push_back(first + j);
      weight.push_back(count[g] / k + (j < count[g] % k ? 1 : 0));
    }
    first += k;
  }
  entry.push_back(-1);
  weight.push_back(n - placed);
  // Smooth weighted round robin over one period of n: each entry exactly its weight, spread
  // evenly, so no prefix goes unused for long (a long gap would let an LRU cache evict it, which
  // is the load's doing, not the row's); the seed picks where the period starts.
  std::vector<int> slots(static_cast<size_t>(n), -1), current(entry.size(), 0);
  for (int i = 0; i < n; ++i) {
    size_t best = 0;
    for (size_t e = 0; e < entry.size(); ++e) {
      current[e] += weight[e];
      if (current[e] > current[best]) best = e;
    }
    current[best] -= n;
    slots[static_cast<size_t>(i)] = entry[best];
  }
  if (n > 0) {
    const auto shift = static_cast<std::ptrdiff_t>(SplitMix64(seed ^ 0x707265666978ULL) % n);
    std::rotate(slots.begin(), slots.begin() + shift, slots.end());
  }
  return slots;
}

const PrefixGroup& GroupOfPrefix(const PrefixReuse& prefix, int p) {
  for (const PrefixGroup& g : prefix.groups) {
    if (p < g.prefixes) return g;
    p -= g.prefixes;
  }
  return prefix.groups.back();
}

std::string ReuseInWords(const Row& row) {
  std::ostringstream o;
  if (row.prefix) {
    for (const PrefixGroup& g : row.prefix->groups) {
      o << (o.tellp() > 0 ? "; " : "") << g.prefixes << (g.prefixes == 1 ? " prefix" : " prefixes")
        << " of " << g.tokens << " tokens for " << g.share * 100 << "% of prompts";
    }
  } else if (row.sessions) {
    const Sessions& s = *row.sessions;
    if (!s.trajectory.empty()) {
      o << "trajectories from " << s.trajectory.substr(s.trajectory.find_last_of('/') + 1) << " ("
        << s.paths.size() << " sessions)";
      if (s.token_scale != 1 || s.time_scale != 1) {
        o << ", lengths x" << s.token_scale << " (" << s.scaled_turns << " turns changed), times x"
          << s.time_scale;
      }
      if (s.blocks) {
        o << ", each turn its whole recorded prompt from blocks of " << s.blocks->block_tokens
          << " tokens (" << s.blocks->merge << " trace blocks each), declaring its leading blocks "
          << "that earlier turns of its session and sub-agents sent";
      }
      if (!s.gate_every_turn) o << ", gated as turn 1 and later turns";
    } else {
      o << s.turns << " turns, +" << s.user_tokens << " tokens a turn, think " << s.think
        << " mean " << s.think_mean_s << " s";
    }
  } else if (row.mix && row.mix->blocks) {
    const std::string& t = row.mix->traffic;
    o << "blocks of " << row.mix->blocks->block_tokens << " tokens from "
      << t.substr(t.find_last_of('/') + 1)
      << ", each request declaring its leading blocks that earlier requests sent";
  }
  return o.str();
}

}  // namespace capq
