// TraceLab round traces (uw-syfi/TraceLab, example_sessions/derived/README.md) read as
// trajectories; see capq/model/session_import.h.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "capq/model/session_import.h"

namespace capq {
namespace {

using nlohmann::json;

Status FieldError(const std::string& file, int line, const std::string& field,
                  const std::string& what) {
  return Status::InvalidArgument(file + ":" + std::to_string(line) + ": " + field + ": " + what);
}

// One LLM round as recorded.
struct Round {
  int line = 0;
  int64_t index = 0;
  int64_t total = 0, prefix = 0, appended = 0, output = 0;
  int64_t send_us = 0;  // its latest input event (the first event when it has none)
  int64_t end_us = 0;   // its latest event
  bool user_input = false;
};

// "2026-06-01T05:40:20.151Z" (any number of fractional digits; "Z" or "+00:00"): microseconds
// since the epoch.
std::optional<int64_t> IsoMicros(const std::string& s) {
  std::tm tm{};
  int used = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) != 6) {
    return std::nullopt;
  }
  std::string rest = s.substr(static_cast<size_t>(used));
  int64_t frac_us = 0;
  if (!rest.empty() && rest[0] == '.') {
    size_t end = 1;
    for (int64_t scale = 100000;
         end < rest.size() && std::isdigit(static_cast<unsigned char>(rest[end]));
         ++end, scale /= 10) {
      frac_us += (rest[end] - '0') * scale;
    }
    if (end == 1) return std::nullopt;
    rest = rest.substr(end);
  }
  if (rest != "Z" && rest != "+00:00") return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&tm)) * 1000000 + frac_us;
}

bool CountAt(const json& j, const char* key, int64_t min, int64_t* out) {
  if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < min) return false;
  *out = j[key].get<int64_t>();
  return true;
}

Status ReadEvents(const json& j, const std::string& file, Round* r) {
  if (!j.contains("timing_events") || !j["timing_events"].is_array() ||
      j["timing_events"].empty()) {
    return FieldError(file, r->line, "timing_events", "expected an array of events");
  }
  std::optional<int64_t> first, input;
  for (size_t i = 0; i < j["timing_events"].size(); ++i) {
    const json& e = j["timing_events"][i];
    const std::string at = "timing_events[" + std::to_string(i) + "]";
    if (!e.is_object() || !e.contains("event_type") || !e["event_type"].is_string()) {
      return FieldError(file, r->line, at + ".event_type", "expected a string");
    }
    const std::string ts = e.contains("timestamp") && e["timestamp"].is_string()
                               ? e["timestamp"].get<std::string>()
                               : "";
    const std::optional<int64_t> us = IsoMicros(ts);
    if (!us) {
      return FieldError(file, r->line, at + ".timestamp",
                        "expected ISO-8601 UTC (2026-06-01T05:40:20.151Z), got '" + ts + "'");
    }
    const std::string type = e["event_type"].get<std::string>();
    if (type == "user_message" || type == "tool_result") input = std::max(input.value_or(*us), *us);
    r->user_input = r->user_input || type == "user_message";
    first = first.value_or(*us);
    r->end_us = i == 0 ? *us : std::max(r->end_us, *us);
  }
  r->send_us = input.value_or(*first);
  return Status::Ok();
}

Result<Round> ReadRound(const json& j, const std::string& file, int line) {
  Round r;
  r.line = line;
  if (!CountAt(j, "round_index", 0, &r.index)) {
    return FieldError(file, line, "round_index", "expected an integer >= 0");
  }
  if (!CountAt(j, "input_tokens_total", 1, &r.total)) {
    return FieldError(file, line, "input_tokens_total", "expected an integer > 0");
  }
  for (auto [key, v] :
       {std::pair{"prefix_tokens", &r.prefix}, {"newly_append_tokens", &r.appended}}) {
    if (!CountAt(j, key, 0, v)) return FieldError(file, line, key, "expected an integer >= 0");
  }
  if (r.prefix + r.appended != r.total) {
    return FieldError(file, line, "newly_append_tokens",
                      "prefix_tokens + newly_append_tokens = " + std::to_string(r.prefix) + " + " +
                          std::to_string(r.appended) + ", not input_tokens_total " +
                          std::to_string(r.total));
  }
  if (!CountAt(j, "output_tokens", 1, &r.output)) {
    return FieldError(file, line, "output_tokens", "expected an integer > 0");
  }
  CAPQ_RETURN_IF_ERROR(ReadEvents(j, file, &r));
  return r;
}

TrajectorySession Session(const std::string& name, const std::vector<Round>& rounds) {
  TrajectorySession s{name, "", std::nullopt, "", {}};
  for (size_t k = 0; k < rounds.size(); ++k) {
    const Round& r = rounds[k];
    TrajectoryTurn t;
    t.input_tokens = k == 0 ? r.total : std::max<int64_t>(1, r.appended);
    t.output_tokens = r.output;
    t.prompt_tokens = r.total;
    t.cached_tokens = r.prefix;
    t.offset_s = static_cast<double>(std::max<int64_t>(0, r.send_us - rounds[0].send_us)) / 1e6;
    if (k + 1 < rounds.size()) {
      const Round& next = rounds[k + 1];
      t.delay_s = static_cast<double>(std::max<int64_t>(0, next.send_us - r.end_us)) / 1e6;
      t.delay_cause = next.user_input ? DelayCause::kUser : DelayCause::kTool;
    }
    s.turns.push_back(std::move(t));
  }
  return s;
}

}  // namespace

Result<ImportedSessions> ImportTraceLab(const std::string& text, const std::string& file) {
  std::vector<std::pair<std::string, std::vector<Round>>> sessions;
  std::map<std::string, size_t> index;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const json j = json::parse(line, nullptr, false);
    if (!j.is_object())
      return Status::InvalidArgument(file + ":" + std::to_string(n) + ": not a JSON object");
    if (!j.contains("session_id") || !j["session_id"].is_string()) {
      return FieldError(file, n, "session_id", "expected a string");
    }
    Result<Round> r = ReadRound(j, file, n);
    if (!r.ok()) return r.status();
    const auto [it, added] = index.emplace(j["session_id"].get<std::string>(), sessions.size());
    if (added) sessions.push_back({it->first, {}});
    std::vector<Round>& rounds = sessions[it->second].second;
    if (!rounds.empty() && r->index <= rounds.back().index) {
      return FieldError(file, n, "round_index",
                        std::to_string(r->index) + " after " + std::to_string(rounds.back().index) +
                            " in session " + it->first + " (a session's rounds come in order)");
    }
    rounds.push_back(*r);
  }
  if (sessions.empty()) return Status::InvalidArgument(file + ": no rounds");
  ImportedSessions out;
  out.file = file;
  for (const auto& [name, rounds] : sessions) out.sessions.push_back(Session(name, rounds));
  return out;
}

}  // namespace capq
