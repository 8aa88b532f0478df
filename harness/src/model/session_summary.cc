#include "capq/model/session_summary.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "capq/text.h"

namespace capq {
namespace {

// The top-level session each session belongs to (itself, or its parent's, and so on up).
std::vector<std::string> Roots(const std::vector<TrajectorySession>& sessions) {
  std::map<std::string, std::string> root_of;
  std::vector<std::string> out;
  for (const TrajectorySession& s : sessions) {
    const auto parent = root_of.find(s.parent);
    out.push_back(s.parent.empty() || parent == root_of.end() ? s.name : parent->second);
    root_of[s.name] = out.back();
  }
  return out;
}

void AddBlocks(const std::vector<TrajectorySession>& sessions, SessionSummary* sum) {
  const std::vector<std::string> roots = Roots(sessions);
  std::set<int64_t> seen;
  std::map<std::string, std::pair<int64_t, std::set<int64_t>>> per_root;  // references, distinct
  for (size_t i = 0; i < sessions.size(); ++i) {
    auto& [refs, distinct] = per_root[roots[i]];
    for (const TrajectoryTurn& t : sessions[i].turns) {
      refs += static_cast<int64_t>(t.block_ids.size());
      distinct.insert(t.block_ids.begin(), t.block_ids.end());
      for (int64_t id : t.block_ids) sum->blocks_seen_before += seen.insert(id).second ? 0 : 1;
      sum->block_references += static_cast<int64_t>(t.block_ids.size());
    }
  }
  bool any = false;
  for (const auto& [root, r] : per_root) {
    if (r.first == 0) continue;
    const double reuse = 1.0 - static_cast<double>(r.second.size()) / static_cast<double>(r.first);
    sum->session_reuse_min = any ? std::min(sum->session_reuse_min, reuse) : reuse;
    sum->session_reuse_max = any ? std::max(sum->session_reuse_max, reuse) : reuse;
    any = true;
  }
}

void AddTurns(const TrajectorySession& s, SessionSummary* sum, std::vector<double>* prompts,
              std::vector<double>* outputs, std::vector<double>* user, std::vector<double>* tool) {
  int64_t history = 0;
  for (size_t k = 0; k < s.turns.size(); ++k) {
    const TrajectoryTurn& t = s.turns[k];
    const int64_t prompt = t.prompt_tokens.value_or(history + t.input_tokens);
    history += t.input_tokens + t.output_tokens;
    prompts->push_back(static_cast<double>(prompt));
    outputs->push_back(static_cast<double>(t.output_tokens));
    if (k + 1 < s.turns.size())
      (t.delay_cause == DelayCause::kUser ? user : tool)->push_back(t.delay_s);
    if (t.cached_tokens) {
      sum->cached_prompt_tokens += prompt;
      sum->cached_tokens += *t.cached_tokens;
    }
  }
}

std::string SpreadText(const Spread& s, int decimals) {
  if (s.count == 0) return "none";
  return "p50 " + FormatFixed(s.p50, decimals) + ", p95 " + FormatFixed(s.p95, decimals) +
         ", p99 " + FormatFixed(s.p99, decimals) + ", max " + FormatFixed(s.max, decimals);
}

std::string Percent(double part, double whole) {
  return FormatFixed(whole > 0 ? 100.0 * part / whole : 0, 1) + " %";
}

}  // namespace

Spread SpreadOf(std::vector<double> v) {
  Spread s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const auto at = [&](double p) {
    const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
  };
  s.count = static_cast<int>(v.size());
  s.p50 = at(50);
  s.p95 = at(95);
  s.p99 = at(99);
  s.max = v.back();
  return s;
}

SessionSummary SummarizeSessions(const std::vector<TrajectorySession>& sessions) {
  SessionSummary sum;
  std::vector<double> prompts, outputs, user, tool;
  for (const TrajectorySession& s : sessions) {
    (s.parent.empty() ? sum.sessions : sum.subagents) += 1;
    sum.turns += static_cast<int>(s.turns.size());
    AddTurns(s, &sum, &prompts, &outputs, &user, &tool);
  }
  sum.prompt_tokens = SpreadOf(std::move(prompts));
  sum.output_tokens = SpreadOf(std::move(outputs));
  sum.user_delay_s = SpreadOf(std::move(user));
  sum.tool_delay_s = SpreadOf(std::move(tool));
  AddBlocks(sessions, &sum);
  return sum;
}

std::string SessionSummaryText(const SessionSummary& s) {
  std::string out = std::to_string(s.sessions) + " sessions, " + std::to_string(s.subagents) +
                    " sub-agents, " + std::to_string(s.turns) + " turns\n";
  out += "  per turn (paired), prompt tokens: " + SpreadText(s.prompt_tokens, 0) + "\n";
  out += "  per turn (paired), output tokens: " + SpreadText(s.output_tokens, 0) + "\n";
  out += "  user think time after " + std::to_string(s.user_delay_s.count) +
         " turns, s: " + SpreadText(s.user_delay_s, 1) + "\n";
  out += "  tool time after " + std::to_string(s.tool_delay_s.count) +
         " turns, s: " + SpreadText(s.tool_delay_s, 1) + "\n";
  if (s.block_references > 0) {
    out += "  prefix blocks: " + std::to_string(s.blocks_seen_before) + " of " +
           std::to_string(s.block_references) + " references seen before (" +
           Percent(static_cast<double>(s.blocks_seen_before),
                   static_cast<double>(s.block_references)) +
           "; per session with its sub-agents " + Percent(s.session_reuse_min, 1) + " to " +
           Percent(s.session_reuse_max, 1) + ")\n";
  }
  if (s.cached_prompt_tokens > 0) {
    out +=
        "  cache-read tokens recorded: " + std::to_string(s.cached_tokens) + " of " +
        std::to_string(s.cached_prompt_tokens) + " prompt tokens (" +
        Percent(static_cast<double>(s.cached_tokens), static_cast<double>(s.cached_prompt_tokens)) +
        ")\n";
  }
  return out;
}

}  // namespace capq
