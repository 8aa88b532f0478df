#include "capq/model/trajectory.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

namespace capq {
namespace {

using nlohmann::json;

Status LineError(const std::string& file, int line, const std::string& what) {
  return Status::InvalidArgument(file + ":" + std::to_string(line) + ": " + what);
}

bool IsTurn(const json& j) {
  return j.is_object() && j.contains("schema") && j["schema"].is_string() &&
         j["schema"].get<std::string>() == kTrajectorySchema;
}

bool IntAtLeast(const json& j, const char* key, int64_t min, int64_t* out) {
  if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < min) return false;
  *out = j[key].get<int64_t>();
  return true;
}

bool Seconds(const json& j, const char* key, double* out) {
  if (!j[key].is_number() || !(j[key].get<double>() >= 0) || !std::isfinite(j[key].get<double>())) {
    return false;
  }
  *out = j[key].get<double>();
  return true;
}

Status ReadBlocks(const json& j, const std::string& file, int line, TrajectoryTurn* t) {
  const json& b = j["prefix_blocks"];
  if (!b.is_object() || !IntAtLeast(b, "block_tokens", 1, &t->block_tokens) || !b.contains("ids") ||
      !b["ids"].is_array()) {
    return LineError(file, line, "prefix_blocks: expected block_tokens > 0 and an ids array");
  }
  for (const json& id : b["ids"]) {
    if (!id.is_number_integer()) return LineError(file, line, "prefix_blocks.ids: integers");
    t->block_ids.push_back(id.get<int64_t>());
  }
  // The ids cover the prompt's full blocks, and at most one partial block after them.
  const int64_t covered = static_cast<int64_t>(t->block_ids.size()) * t->block_tokens;
  if (t->prompt_tokens && covered >= *t->prompt_tokens + t->block_tokens) {
    return LineError(file, line,
                     "prefix_blocks: " + std::to_string(t->block_ids.size()) + " blocks of " +
                         std::to_string(t->block_tokens) + " tokens exceed prompt_tokens " +
                         std::to_string(*t->prompt_tokens));
  }
  return Status::Ok();
}

// The fields a recorded trace adds to a turn; all optional.
Status ReadTraceFields(const json& j, const std::string& file, int line, TrajectoryTurn* t) {
  int64_t n = 0;
  if (j.contains("prompt_tokens")) {
    if (!IntAtLeast(j, "prompt_tokens", t->input_tokens, &n)) {
      return LineError(file, line, "prompt_tokens: expected an integer >= input_tokens");
    }
    t->prompt_tokens = n;
  }
  if (j.contains("cached_tokens")) {
    if (!IntAtLeast(j, "cached_tokens", 0, &n) || (t->prompt_tokens && n > *t->prompt_tokens)) {
      return LineError(file, line, "cached_tokens: expected an integer in [0, prompt_tokens]");
    }
    t->cached_tokens = n;
  }
  double s = 0;
  if (j.contains("offset_s")) {
    if (!Seconds(j, "offset_s", &s)) {
      return LineError(file, line, "offset_s: expected a number of seconds >= 0");
    }
    t->offset_s = s;
  }
  if (j.contains("delay_cause")) {
    const std::string c = j["delay_cause"].is_string() ? j["delay_cause"].get<std::string>() : "";
    if (c != "tool" && c != "user") {
      return LineError(file, line, "delay_cause: expected \"tool\" or \"user\"");
    }
    t->delay_cause = c == "tool" ? DelayCause::kTool : DelayCause::kUser;
  }
  if (j.contains("prefix_blocks")) return ReadBlocks(j, file, line, t);
  return Status::Ok();
}

Result<TrajectoryTurn> TurnFromJson(const json& j, const std::string& file, int line) {
  TrajectoryTurn t;
  t.line = line;
  if (!IntAtLeast(j, "input_tokens", 1, &t.input_tokens) ||
      !IntAtLeast(j, "output_tokens", 1, &t.output_tokens)) {
    return LineError(file, line, "expected input_tokens and output_tokens, integers > 0");
  }
  if (j.contains("tool_delay_s") && !Seconds(j, "tool_delay_s", &t.delay_s)) {
    return LineError(file, line, "tool_delay_s: expected a number of seconds >= 0");
  }
  CAPQ_RETURN_IF_ERROR(ReadTraceFields(j, file, line, &t));
  return t;
}

// A session's own fields, on its first turn only: a sub-agent names its parent, an earlier
// session, and when it started after the parent's start.
Status ReadSessionFields(const json& j, const std::string& file, int line,
                         const std::vector<TrajectorySession>& sessions, TrajectorySession* s) {
  const bool first = s->turns.empty();
  for (const char* key : {"parent", "start_offset_s", "agent_type"}) {
    if (j.contains(key) && !first) {
      return LineError(file, line, std::string(key) + ": belongs on the session's first turn");
    }
  }
  if (!first) return Status::Ok();
  if (j.contains("agent_type")) {
    if (!j["agent_type"].is_string()) return LineError(file, line, "agent_type: a string");
    s->agent_type = j["agent_type"].get<std::string>();
  }
  if (j.contains("parent") != j.contains("start_offset_s")) {
    return LineError(file, line, "parent and start_offset_s: a sub-agent gives both");
  }
  if (!j.contains("parent")) return Status::Ok();
  if (!j["parent"].is_string()) return LineError(file, line, "parent: a session name");
  s->parent = j["parent"].get<std::string>();
  bool found = false;
  for (size_t i = 0; i + 1 < sessions.size() && !found; ++i) found = sessions[i].name == s->parent;
  if (!found) return LineError(file, line, "parent: no earlier session named " + s->parent);
  double at = 0;
  if (!Seconds(j, "start_offset_s", &at)) {
    return LineError(file, line, "start_offset_s: expected a number of seconds >= 0");
  }
  s->start_offset_s = at;
  return Status::Ok();
}

// One line: the turn is appended to the last session, or starts the next one.
Status AddLine(const json& j, const std::string& file, int n, std::vector<TrajectorySession>* out) {
  if (!IsTurn(j)) {
    return LineError(file, n, std::string("expected a ") + kTrajectorySchema + " turn");
  }
  if (!j.contains("session") || !j["session"].is_string() || !j.contains("turn") ||
      !j["turn"].is_number_integer()) {
    return LineError(file, n, "expected a string session and an integer turn");
  }
  const std::string session = j["session"].get<std::string>();
  const int64_t turn = j["turn"].get<int64_t>();
  if (out->empty() || session != out->back().name) {
    out->emplace_back();
    out->back().name = session;
  }
  TrajectorySession& s = out->back();
  if (turn != static_cast<int64_t>(s.turns.size()) + 1) {
    return LineError(file, n,
                     "session " + session + ": expected turn " +
                         std::to_string(s.turns.size() + 1) + ", got " + std::to_string(turn) +
                         " (a session's turns come in order, from 1)");
  }
  CAPQ_RETURN_IF_ERROR(ReadSessionFields(j, file, n, *out, &s));
  Result<TrajectoryTurn> t = TurnFromJson(j, file, n);
  if (!t.ok()) return t.status();
  s.turns.push_back(std::move(*t));
  return Status::Ok();
}

nlohmann::ordered_json TurnToJson(const TrajectorySession& s, size_t k) {
  const TrajectoryTurn& t = s.turns[k];
  nlohmann::ordered_json j = {{"schema", kTrajectorySchema},
                              {"session", s.name},
                              {"turn", k + 1},
                              {"input_tokens", t.input_tokens},
                              {"output_tokens", t.output_tokens}};
  if (t.delay_s > 0 || t.delay_cause != DelayCause::kUnknown) j["tool_delay_s"] = t.delay_s;
  if (t.delay_cause != DelayCause::kUnknown) {
    j["delay_cause"] = t.delay_cause == DelayCause::kTool ? "tool" : "user";
  }
  if (t.prompt_tokens) j["prompt_tokens"] = *t.prompt_tokens;
  if (t.cached_tokens) j["cached_tokens"] = *t.cached_tokens;
  if (t.offset_s) j["offset_s"] = *t.offset_s;
  if (k == 0 && !s.parent.empty()) {
    j["parent"] = s.parent;
    j["start_offset_s"] = s.start_offset_s.value_or(0);
  }
  if (k == 0 && !s.agent_type.empty()) j["agent_type"] = s.agent_type;
  if (!t.block_ids.empty()) {
    j["prefix_blocks"] = {{"block_tokens", t.block_tokens}, {"ids", t.block_ids}};
  }
  return j;
}

}  // namespace

bool TrajectoryTurn::operator==(const TrajectoryTurn& o) const {
  return input_tokens == o.input_tokens && output_tokens == o.output_tokens &&
         delay_s == o.delay_s && delay_cause == o.delay_cause && prompt_tokens == o.prompt_tokens &&
         cached_tokens == o.cached_tokens && offset_s == o.offset_s &&
         block_tokens == o.block_tokens && block_ids == o.block_ids;
}

bool TrajectorySession::operator==(const TrajectorySession& o) const {
  return name == o.name && parent == o.parent && start_offset_s == o.start_offset_s &&
         agent_type == o.agent_type && turns == o.turns;
}

Result<std::vector<TrajectorySession>> ParseTrajectorySessions(const std::string& text,
                                                               const std::string& file) {
  std::vector<TrajectorySession> out;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    CAPQ_RETURN_IF_ERROR(AddLine(json::parse(line, nullptr, false), file, n, &out));
  }
  if (out.empty()) return Status::InvalidArgument(file + ": no turns");
  return out;
}

std::string TrajectoryToJsonLines(const std::vector<TrajectorySession>& sessions) {
  std::string out;
  for (const TrajectorySession& s : sessions) {
    for (size_t k = 0; k < s.turns.size(); ++k) out += TurnToJson(s, k).dump() + "\n";
  }
  return out;
}

bool LooksLikeTrajectory(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const json j = json::parse(line, nullptr, false);
    return IsTurn(j);
  }
  return false;
}

}  // namespace capq
