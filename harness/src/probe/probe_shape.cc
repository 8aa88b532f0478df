// The shape of an answer, and where two answers to the same request differ in it
// (probe_internal.h). Values that carry data (numbers, ids, text, timestamps) are never compared.
#include <strings.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "probe_internal.h"

namespace capq::probe {
namespace {

// Keys whose string value names a kind rather than carrying data.
bool NamesAKind(const std::string& key) {
  return key == "object" || key == "finish_reason" || key == "role" || key == "type";
}

std::string KeyList(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "" : ",") + k;
  return out;
}

// Where a dialect's claim on key order holds: a chunk's top level and its choices (llama.cpp
// writes "choices" first and a choice's "finish_reason" first).
bool OrderClaimed(const std::string& at) {
  const auto ends = [&](const std::string& tail) {
    return at.size() >= tail.size() && at.compare(at.size() - tail.size(), tail.size(), tail) == 0;
  };
  return ends("$") || ends("$.choices[]");
}

// The order of the keys both objects have, each side's.
void KeyOrderDiff(const ojson& want, const ojson& got, const std::string& at,
                  std::vector<ShapeDifference>* out) {
  std::vector<std::string> w, g;
  for (auto it = want.begin(); it != want.end(); ++it) {
    if (got.contains(it.key())) w.push_back(it.key());
  }
  for (auto it = got.begin(); it != got.end(); ++it) {
    if (want.contains(it.key())) g.push_back(it.key());
  }
  if (w != g) out->push_back({"", at + " key order", KeyList(w), KeyList(g)});
}

void ObjectDiff(const ojson& want, const ojson& got, const std::string& at, bool key_order,
                std::vector<ShapeDifference>* out) {
  for (auto it = want.begin(); it != want.end(); ++it) {
    const std::string sub = at + "." + it.key();
    if (!got.contains(it.key())) {
      out->push_back({"", sub, TypeName(it.value()), "absent"});
      continue;
    }
    const ojson& g = got[it.key()];
    if (NamesAKind(it.key()) && it.value().is_string() && g.is_string() && it.value() != g) {
      out->push_back({"", sub, it.value().dump(), g.dump()});
    }
    JsonShapeDiff(it.value(), g, sub, key_order, out);
  }
  for (auto it = got.begin(); it != got.end(); ++it) {
    if (!want.contains(it.key())) {
      out->push_back({"", at + "." + it.key(), "absent", TypeName(it.value())});
    }
  }
  if (key_order && OrderClaimed(at)) KeyOrderDiff(want, got, at, out);
}

// The end of the last complete event in `text` (LF or CRLF line ends), its events appended.
size_t TakeEvents(const std::string& text, std::vector<SseEvent>* out) {
  size_t pos = 0, consumed = 0;
  SseEvent ev;
  bool any = false;
  while (pos < text.size()) {
    const size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) break;
    std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {
      if (any) out->push_back(ev);
      ev = SseEvent{};
      any = false;
      consumed = pos;
    } else if (line[0] == ':') {
      if (!any) ev.comment = true;
      any = true;
    } else if (line.rfind("data:", 0) == 0) {
      const size_t v = line.size() > 5 && line[5] == ' ' ? 6 : 5;
      ev.data += (ev.comment || ev.data.empty() ? "" : "\n") + line.substr(v);
      ev.comment = false;
      any = true;
    }
  }
  return consumed;
}

std::string Fold(const std::vector<std::string>& groups) {
  std::string out;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (i > 0 && groups[i] == groups[i - 1]) continue;
    out += (out.empty() ? "" : " ") + groups[i];
  }
  return out;
}

bool HasText(const nlohmann::json& v) { return v.is_string() && !v.get<std::string>().empty(); }

}  // namespace

std::string TypeName(const ojson& v) {
  switch (v.type()) {
    case ojson::value_t::null:
      return "null";
    case ojson::value_t::boolean:
      return "bool";
    case ojson::value_t::number_integer:
    case ojson::value_t::number_unsigned:
    case ojson::value_t::number_float:
      return "number";
    case ojson::value_t::string:
      return "string";
    case ojson::value_t::array:
      return v.empty() ? "empty array" : "array";
    case ojson::value_t::object:
      return "object";
    default:
      return "other";
  }
}

void JsonShapeDiff(const ojson& want, const ojson& got, const std::string& at, bool key_order,
                   std::vector<ShapeDifference>* out) {
  if (TypeName(want) != TypeName(got)) {
    out->push_back({"", at, TypeName(want), TypeName(got)});
    return;
  }
  if (want.is_object()) {
    ObjectDiff(want, got, at, key_order, out);
  } else if (want.is_array() && !want.empty()) {
    // Every recorded element against capq's element at its index, or capq's last.
    for (size_t i = 0; i < want.size(); ++i) {
      JsonShapeDiff(want[i], got[std::min(i, got.size() - 1)], at + "[]", key_order, out);
    }
  }
}

std::vector<SseEvent> SseEvents(const std::string& text) {
  std::vector<SseEvent> out;
  const size_t consumed = TakeEvents(text, &out);
  const std::string rest = text.substr(consumed);
  if (rest.find_first_not_of("\r\n") != std::string::npos) TakeEvents(rest + "\n\n", &out);
  return out;
}

char EventKind(const SseEvent& e) {
  if (e.comment) return ':';
  if (e.data == "[DONE]") return 'D';
  const nlohmann::json j = nlohmann::json::parse(e.data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return '?';
  if (j.contains("error")) return 'E';
  const bool usage = j.contains("usage") && j["usage"].is_object();
  if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) {
    return usage ? 'U' : '?';
  }
  const nlohmann::json& c = j["choices"][0];
  if (!c.is_object()) return '?';
  if (HasText(c.value("finish_reason", nlohmann::json()))) return 'F';
  const nlohmann::json d = c.value("delta", nlohmann::json::object());
  if (!d.is_object()) return '?';
  if (HasText(d.value("content", nlohmann::json())) ||
      HasText(d.value("reasoning_content", nlohmann::json()))) {
    return 'C';
  }
  return d.contains("role") ? 'R' : 'e';
}

std::string KindSequence(const std::vector<SseEvent>& events) {
  std::vector<std::string> kinds;
  for (const SseEvent& e : events) kinds.emplace_back(1, EventKind(e));
  return Fold(kinds);
}

std::string ChunkGrouping(const std::vector<std::string>& chunks) {
  std::vector<std::string> groups;
  std::string pending;
  for (const std::string& chunk : chunks) {
    pending += chunk;
    std::vector<SseEvent> events;
    pending.erase(0, TakeEvents(pending, &events));
    std::string g;
    for (const SseEvent& e : events) g += EventKind(e);
    groups.push_back(g.empty() ? "." : g);
  }
  return Fold(groups);
}

std::vector<std::string> MetricNames(const std::string& text) {
  std::set<std::string> names;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      names.insert(line.substr(7, line.find(' ', 7) - 7));
    } else if (!line.empty() && line[0] != '#') {
      names.insert(line.substr(0, line.find_first_of("{ ")));
    }
  }
  return {names.begin(), names.end()};
}

}  // namespace capq::probe
