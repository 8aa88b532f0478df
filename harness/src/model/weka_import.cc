// WEKA kv-cache-tester traces (callanjfox/kv-cache-tester, docs/trace_replay_tester.md) read as
// trajectories; see capq/model/session_import.h.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "capq/model/session_import.h"

namespace capq {
namespace {

using nlohmann::json;

Status PathError(const std::string& file, const std::string& path, const std::string& what) {
  return Status::InvalidArgument(file + ": " + path + ": " + what);
}

struct Trace {
  const std::string& file;
  int64_t block_tokens = 0;
};

// A request as recorded, before the delays between turns are known.
struct Request {
  TrajectoryTurn turn;
  double t_s = 0;
  double api_s = 0;
  std::optional<double> think_s;   // the client's delay before this request
  std::optional<bool> user_input;  // its new input holds a user message (input_types "text")
};

// The string at `key`; `fallback` when there is none or it is not a string.
std::string StringOr(const json& j, const char* key, const std::string& fallback) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return fallback;
  return j[key].get<std::string>();
}

bool Seconds(const json& r, const char* key, double* out) {
  if (!r.contains(key) || !r[key].is_number()) return false;
  *out = r[key].get<double>();
  return *out >= 0 && std::isfinite(*out);
}

bool Count(const json& r, const char* key, int64_t* out) {
  if (!r.contains(key) || !r[key].is_number_integer() || r[key].get<int64_t>() < 1) return false;
  *out = r[key].get<int64_t>();
  return true;
}

Status ReadHashIds(const json& r, const std::string& path, const Trace& tr, Request* q) {
  if (!r.contains("hash_ids") || !r["hash_ids"].is_array()) {
    return PathError(tr.file, path + ".hash_ids", "expected an array of block ids");
  }
  for (const json& id : r["hash_ids"]) {
    if (!id.is_number_integer()) return PathError(tr.file, path + ".hash_ids", "integers expected");
    q->turn.block_ids.push_back(id.get<int64_t>());
  }
  // Full blocks only: the tokens after the last full block are in no block.
  const int64_t in = *q->turn.prompt_tokens;
  const auto want = static_cast<size_t>(in / tr.block_tokens);
  if (q->turn.block_ids.size() != want) {
    return PathError(tr.file, path + ".hash_ids",
                     std::to_string(q->turn.block_ids.size()) + " ids for " + std::to_string(in) +
                         " tokens; full blocks of " + std::to_string(tr.block_tokens) +
                         " tokens need " + std::to_string(want));
  }
  q->turn.block_tokens = tr.block_tokens;
  return Status::Ok();
}

Status ReadTimes(const json& r, const std::string& path, const Trace& tr, Request* q) {
  if (!Seconds(r, "t", &q->t_s)) return PathError(tr.file, path + ".t", "expected seconds >= 0");
  q->turn.offset_s = q->t_s;
  for (const char* key : {"api_time", "think_time"}) {
    double s = 0;
    if (r.contains(key) && !Seconds(r, key, &s)) {
      return PathError(tr.file, path + "." + key, "expected seconds >= 0");
    }
  }
  Seconds(r, "api_time", &q->api_s);
  double think = 0;
  if (Seconds(r, "think_time", &think)) q->think_s = think;
  return Status::Ok();
}

Result<Request> ReadRequest(const json& r, const std::string& path, const Trace& tr) {
  Request q;
  int64_t n = 0;
  if (!Count(r, "in", &n)) return PathError(tr.file, path + ".in", "expected an integer > 0");
  q.turn.prompt_tokens = n;
  if (!Count(r, "out", &q.turn.output_tokens)) {
    return PathError(tr.file, path + ".out", "expected an integer > 0");
  }
  CAPQ_RETURN_IF_ERROR(ReadTimes(r, path, tr, &q));
  CAPQ_RETURN_IF_ERROR(ReadHashIds(r, path, tr, &q));
  if (r.contains("input_types")) {
    if (!r["input_types"].is_array()) {
      return PathError(tr.file, path + ".input_types", "expected an array of strings");
    }
    q.user_input = false;
    for (const json& k : r["input_types"]) {
      if (!k.is_string()) return PathError(tr.file, path + ".input_types", "strings expected");
      if (k.get<std::string>() == "text") q.user_input = true;
    }
  }
  return q;
}

size_t SharedLead(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first -
                             a.begin());
}

// The session's turns: the delay after each is the next request's think_time, and its new
// tokens are what its prompt adds beyond the leading blocks it shares with the one before.
std::vector<TrajectoryTurn> Turns(std::vector<Request> q, int64_t block_tokens) {
  std::vector<TrajectoryTurn> out;
  for (size_t k = 0; k < q.size(); ++k) {
    TrajectoryTurn t = std::move(q[k].turn);
    const int64_t prompt = *t.prompt_tokens;
    const auto shared =
        k == 0 ? 0 : static_cast<int64_t>(SharedLead(t.block_ids, out.back().block_ids));
    t.input_tokens = std::max<int64_t>(1, prompt - shared * block_tokens);
    if (k + 1 < q.size()) {
      const Request& next = q[k + 1];
      t.delay_s = next.think_s.value_or(std::max(0.0, next.t_s - q[k].t_s - q[k].api_s));
      if (next.user_input) t.delay_cause = *next.user_input ? DelayCause::kUser : DelayCause::kTool;
    }
    out.push_back(std::move(t));
  }
  return out;
}

Status ReadList(const json& list, const std::string& path, const std::string& name, const Trace& tr,
                std::vector<TrajectorySession>* out);

Status ReadSubagent(const json& e, const std::string& path, const std::string& parent,
                    const Trace& tr, std::vector<TrajectorySession>* out) {
  if (!e.contains("agent_id") || !e["agent_id"].is_string()) {
    return PathError(tr.file, path + ".agent_id", "expected a string");
  }
  const std::string name = parent + "/" + e["agent_id"].get<std::string>();
  for (const TrajectorySession& s : *out) {
    if (s.name == name) return PathError(tr.file, path + ".agent_id", "repeats " + name);
  }
  double start = 0;
  if (!Seconds(e, "t", &start)) return PathError(tr.file, path + ".t", "expected seconds >= 0");
  if (e.contains("subagent_type") && !e["subagent_type"].is_string()) {
    return PathError(tr.file, path + ".subagent_type", "expected a string");
  }
  const size_t index = out->size();
  CAPQ_RETURN_IF_ERROR(ReadList(e.value("requests", json()), path + ".requests", name, tr, out));
  TrajectorySession& s = (*out)[index];
  s.parent = parent;
  s.start_offset_s = start;
  s.agent_type = StringOr(e, "subagent_type", "");
  return Status::Ok();
}

// A session from its requests list; its sub-agents follow it in `out`, in the order they appear.
Status ReadList(const json& list, const std::string& path, const std::string& name, const Trace& tr,
                std::vector<TrajectorySession>* out) {
  if (!list.is_array() || list.empty()) return PathError(tr.file, path, "expected requests");
  const size_t index = out->size();
  out->push_back({name, "", std::nullopt, "", {}});
  std::vector<Request> requests;
  std::vector<size_t> subagents;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = path + "[" + std::to_string(i) + "]";
    const json& e = list[i];
    const std::string type = StringOr(e, "type", "");
    if (type == "subagent") {
      subagents.push_back(i);
    } else if (type == "n" || type == "s") {
      Result<Request> q = ReadRequest(e, at, tr);
      if (!q.ok()) return q.status();
      requests.push_back(std::move(*q));
    } else {
      return PathError(tr.file, at + ".type", "expected \"n\", \"s\" or \"subagent\"");
    }
  }
  if (requests.empty()) return PathError(tr.file, path, "no requests besides sub-agents");
  (*out)[index].turns = Turns(std::move(requests), tr.block_tokens);
  for (size_t i : subagents) {
    const std::string at = path + "[" + std::to_string(i) + "]";
    CAPQ_RETURN_IF_ERROR(ReadSubagent(list[i], at, name, tr, out));
  }
  return Status::Ok();
}

Result<json> ParseDocument(const std::string& text, const std::string& file) {
  try {
    json doc = json::parse(text);
    if (!doc.is_object()) return Status::InvalidArgument(file + ": expected a JSON object");
    return doc;
  } catch (const json::parse_error& e) {
    return Status::InvalidArgument(file + ": not JSON at byte " + std::to_string(e.byte) + ": " +
                                   e.what());
  }
}

}  // namespace

Result<ImportedSessions> ImportWeka(const std::string& text, const std::string& file) {
  Result<json> doc = ParseDocument(text, file);
  if (!doc.ok()) return doc.status();
  const json& d = *doc;
  if (!d.contains("id") || !d["id"].is_string() || d["id"].get<std::string>().empty()) {
    return PathError(file, "id", "expected the trace's id, a string");
  }
  Trace tr{file};
  if (!Count(d, "block_size", &tr.block_tokens)) {
    return PathError(file, "block_size", "expected an integer > 0");
  }
  const std::string scope =
      d.contains("hash_id_scope") ? StringOr(d, "hash_id_scope", "") : "local";
  if (scope != "local" && scope != "global") {
    return PathError(file, "hash_id_scope", "expected \"local\" or \"global\"");
  }
  ImportedSessions out;
  out.file = file;
  out.local_block_ids = scope == "local";
  CAPQ_RETURN_IF_ERROR(ReadList(d.value("requests", json()), "requests", d["id"].get<std::string>(),
                                tr, &out.sessions));
  return out;
}

}  // namespace capq
