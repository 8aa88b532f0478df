// Raw records as JSON: every byte a server sent survives a round trip, including invalid UTF-8
// (nlohmann::json refuses to dump such strings, and a crafted server must not be able to stop a
// trial from being written).
#include <openssl/evp.h>

#include <string>

#include "capq/measurement/decode.h"
#include "capq/measurement/loadgen.h"
#include "capq/measurement/raw_evidence.h"
#include "json_scan.h"

namespace capq {
namespace {

std::string Base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return out;
}

bool Unbase64(const std::string& text, std::string* out) {
  if (text.size() % 4 != 0) return false;
  out->assign(3 * (text.size() / 4), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out->data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return false;
  size_t len = static_cast<size_t>(n);
  // EVP_DecodeBlock counts the padding as decoded zero bytes.
  if (!text.empty() && text.back() == '=') --len;
  if (text.size() >= 2 && text[text.size() - 2] == '=') --len;
  out->resize(len);
  return true;
}

nlohmann::json Bytes(const std::string& s) {
  if (IsValidUtf8(s)) return s;
  return nlohmann::json{{"b64", Base64(s)}};
}

Status BytesFrom(const nlohmann::json& j, const char* key, std::string* out) {
  if (j.is_string()) {
    *out = j.get<std::string>();
    return Status::Ok();
  }
  if (j.is_object() && j.contains("b64") && j["b64"].is_string()) {
    if (Unbase64(j["b64"].get<std::string>(), out)) return Status::Ok();
  }
  return Status::InvalidArgument(std::string("raw record: key '") + key +
                                 "' is neither a string nor {\"b64\": ...}");
}

template <typename T>
Status Get(const nlohmann::json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end())
    return Status::InvalidArgument(std::string("raw record: missing key '") + key + "'");
  try {
    *out = it->get<T>();
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("raw record: key '") + key + "': " + e.what());
  }
  return Status::Ok();
}

}  // namespace

nlohmann::json RawRecordToJson(const RawRecord& r) {
  nlohmann::json j;
  j["id"] = r.id;
  j["phase"] = PhaseName(r.phase);
  j["index"] = r.index;
  j["intended_send_ns"] = r.intended_send_ns;
  j["actual_send_ns"] = r.actual_send_ns;
  j["first_byte_ns"] = r.first_byte_ns;
  j["first_body_ns"] = r.first_body_ns;
  j["end_ns"] = r.end_ns;
  j["last_byte_ns"] = r.last_byte_ns;
  j["http_status"] = r.http_status;
  j["content_type"] = Bytes(r.content_type);
  nlohmann::json headers = nlohmann::json::array();
  for (const auto& h : r.response_headers) headers.push_back(Bytes(h));
  j["response_headers"] = std::move(headers);
  // [arrival_ns, data] or [arrival_ns, data, true] when the framer truncated the event.
  nlohmann::json events = nlohmann::json::array();
  for (const auto& e : r.events) {
    nlohmann::json ev = nlohmann::json::array({e.arrival_ns, Bytes(e.data)});
    if (e.truncated) ev.push_back(true);
    events.push_back(std::move(ev));
  }
  j["events"] = std::move(events);
  j["body"] = Bytes(r.body);
  j["body_truncated"] = r.body_truncated;
  j["body_bytes"] = r.body_bytes;
  j["transport_error"] = Bytes(r.transport_error);
  j["timed_out"] = r.timed_out;
  j["cancelled"] = r.cancelled;
  j["sse_comments"] = r.sse_comments;
  j["sse_overflow"] = r.sse_overflow;
  j["sse_unterminated"] = r.sse_unterminated;
  j["reused_connection"] = r.reused_connection;
  j["stalled"] = r.stalled;
  j["cancelled_by_harness"] = r.cancelled_by_harness;
  if (!r.request_body.empty()) j["request_body"] = Bytes(r.request_body);
  return j;
}

namespace {

// A failure reading record `r`'s bytes, named by its id.
Status InRecord(const RawRecord& r, const Status& s) { return s.WithContext("raw record " + r.id); }

// The id and the phase.
Status ReadName(const nlohmann::json& j, RawRecord* r) {
  CAPQ_RETURN_IF_ERROR(Get(j, "id", &r->id));
  std::string phase;
  CAPQ_RETURN_IF_ERROR(Get(j, "phase", &phase));
  if (phase == "warmup") {
    r->phase = Phase::kWarmup;
  } else if (phase == "measured") {
    r->phase = Phase::kMeasured;
  } else {
    return Status::InvalidArgument("raw record " + r->id + ": phase '" + phase +
                                   "' is not warmup or measured");
  }
  return Status::Ok();
}

// The index in its phase, the send times, the stamps and the HTTP status.
Status ReadTimes(const nlohmann::json& j, RawRecord* r) {
  CAPQ_RETURN_IF_ERROR(Get(j, "index", &r->index));
  CAPQ_RETURN_IF_ERROR(Get(j, "intended_send_ns", &r->intended_send_ns));
  CAPQ_RETURN_IF_ERROR(Get(j, "actual_send_ns", &r->actual_send_ns));
  CAPQ_RETURN_IF_ERROR(Get(j, "first_byte_ns", &r->first_byte_ns));
  CAPQ_RETURN_IF_ERROR(Get(j, "first_body_ns", &r->first_body_ns));
  CAPQ_RETURN_IF_ERROR(Get(j, "end_ns", &r->end_ns));
  CAPQ_RETURN_IF_ERROR(Get(j, "http_status", &r->http_status));
  return Status::Ok();
}

// The content type and the final response's header lines.
Status ReadHeaders(const nlohmann::json& j, RawRecord* r) {
  if (!j.contains("content_type"))
    return Status::InvalidArgument("raw record: missing key 'content_type'");
  if (Status s = BytesFrom(j["content_type"], "content_type", &r->content_type); !s.ok())
    return InRecord(*r, s);
  if (!j.contains("response_headers") || !j["response_headers"].is_array()) {
    return Status::InvalidArgument("raw record " + r->id + ": 'response_headers' must be an array");
  }
  for (const auto& h : j["response_headers"]) {
    std::string line;
    if (Status s = BytesFrom(h, "response_headers", &line); !s.ok()) return InRecord(*r, s);
    r->response_headers.push_back(std::move(line));
  }
  return Status::Ok();
}

// The events, where the record carries them.
Status ReadEvents(const nlohmann::json& j, RawRecord* r) {
  // capq/raw/v2 keeps the events on lines of their own (raw_evidence.h).
  if (j.contains("events") && !j["events"].is_array()) {
    return Status::InvalidArgument("raw record " + r->id + ": 'events' must be an array");
  }
  const nlohmann::json no_events = nlohmann::json::array();
  const nlohmann::json& events = j.contains("events") ? j["events"] : no_events;
  r->events.reserve(events.size());
  for (const auto& ev : events) {
    if (!ev.is_array() || ev.size() < 2 || !ev[0].is_number_integer()) {
      return Status::InvalidArgument("raw record " + r->id +
                                     ": each event must be [arrival_ns, data(, truncated)]");
    }
    SseEvent e;
    e.arrival_ns = ev[0].get<int64_t>();
    if (Status s = BytesFrom(ev[1], "events", &e.data); !s.ok()) return InRecord(*r, s);
    e.truncated = ev.size() > 2 && ev[2].is_boolean() && ev[2].get<bool>();
    r->events.push_back(std::move(e));
  }
  return Status::Ok();
}

// The body kept of a response that was no stream, and the transport's error.
Status ReadBody(const nlohmann::json& j, RawRecord* r) {
  if (!j.contains("body"))
    return Status::InvalidArgument("raw record " + r->id + ": missing key 'body'");
  if (Status s = BytesFrom(j["body"], "body", &r->body); !s.ok()) return InRecord(*r, s);
  if (!j.contains("transport_error")) {
    return Status::InvalidArgument("raw record " + r->id + ": missing key 'transport_error'");
  }
  if (Status s = BytesFrom(j["transport_error"], "transport_error", &r->transport_error); !s.ok()) {
    return InRecord(*r, s);
  }
  return Status::Ok();
}

// How the transfer went: the body's size, its end, the framer's counts and the connection.
Status ReadOutcome(const nlohmann::json& j, RawRecord* r) {
  CAPQ_RETURN_IF_ERROR(Get(j, "body_truncated", &r->body_truncated));
  CAPQ_RETURN_IF_ERROR(Get(j, "body_bytes", &r->body_bytes));
  CAPQ_RETURN_IF_ERROR(Get(j, "timed_out", &r->timed_out));
  CAPQ_RETURN_IF_ERROR(Get(j, "cancelled", &r->cancelled));
  CAPQ_RETURN_IF_ERROR(Get(j, "sse_comments", &r->sse_comments));
  CAPQ_RETURN_IF_ERROR(Get(j, "sse_overflow", &r->sse_overflow));
  CAPQ_RETURN_IF_ERROR(Get(j, "sse_unterminated", &r->sse_unterminated));
  CAPQ_RETURN_IF_ERROR(Get(j, "reused_connection", &r->reused_connection));
  return Status::Ok();
}

// The keys a record may lack: fail fast's, and the body built at release.
Status ReadOptional(const nlohmann::json& j, RawRecord* r) {
  // Fail fast's keys; records written before it have none (nothing was stalled or cut by it).
  if (j.contains("last_byte_ns")) CAPQ_RETURN_IF_ERROR(Get(j, "last_byte_ns", &r->last_byte_ns));
  if (j.contains("stalled")) CAPQ_RETURN_IF_ERROR(Get(j, "stalled", &r->stalled));
  if (j.contains("cancelled_by_harness")) {
    CAPQ_RETURN_IF_ERROR(Get(j, "cancelled_by_harness", &r->cancelled_by_harness));
  }
  // Only a body built at release is written; the planned ones are in plan.json.
  if (j.contains("request_body")) {
    if (Status s = BytesFrom(j["request_body"], "request_body", &r->request_body); !s.ok()) {
      return InRecord(*r, s);
    }
  }
  return Status::Ok();
}

}  // namespace

Result<RawRecord> RawRecordFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return Status::InvalidArgument("raw record: not a JSON object");
  RawRecord r;
  CAPQ_RETURN_IF_ERROR(ReadName(j, &r));
  CAPQ_RETURN_IF_ERROR(ReadTimes(j, &r));
  CAPQ_RETURN_IF_ERROR(ReadHeaders(j, &r));
  CAPQ_RETURN_IF_ERROR(ReadEvents(j, &r));
  CAPQ_RETURN_IF_ERROR(ReadBody(j, &r));
  CAPQ_RETURN_IF_ERROR(ReadOutcome(j, &r));
  CAPQ_RETURN_IF_ERROR(ReadOptional(j, &r));
  return r;
}

// ---- capq/raw/v2 lines (raw_evidence.h) -------------------------------------------------------
namespace {

// `s` as a JSON string; REQUIRES: valid UTF-8 (anything else goes through Bytes()).
void AppendJsonString(std::string* out, std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  out->push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(ch);
    } else if (c < 0x20) {
      out->append("\\u00");
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 0xF]);
    } else {
      out->push_back(ch);
    }
  }
  out->push_back('"');
}

void AppendBytes(std::string* out, std::string_view s) {
  if (IsValidUtf8(s)) {
    AppendJsonString(out, s);
  } else {
    out->append("{\"b64\":\"").append(Base64(s)).append("\"}");
  }
}

}  // namespace

std::string RawSentLine(const std::string& id, MonoNs actual_send_ns) {
  std::string out = "{\"sent\":";
  AppendBytes(&out, id);
  return out + ",\"t\":" + std::to_string(actual_send_ns) + "}";
}

std::string RawEventLine(const std::string& id, const SseEvent& ev) {
  std::string out;
  out.reserve(ev.data.size() + 64);
  out = "{\"ev\":";
  AppendBytes(&out, id);
  out += ",\"t\":" + std::to_string(ev.arrival_ns) + ",\"w\":" + std::to_string(ev.wake_ns);
  if (ev.kernel_ns > 0) out += ",\"k\":" + std::to_string(ev.kernel_ns);
  out += ",\"data\":";
  AppendBytes(&out, ev.data);
  if (ev.truncated) out += ",\"truncated\":true";
  out.push_back('}');
  return out;
}

std::string RawRecordLine(const RawRecord& r) {
  nlohmann::json j = RawRecordToJson(r);
  j.erase("events");
  return nlohmann::json{{"record", std::move(j)}}.dump();
}

Result<SseEvent> RawEventFromJson(const nlohmann::json& j) {
  SseEvent e;
  CAPQ_RETURN_IF_ERROR(Get(j, "t", &e.arrival_ns));
  if (j.contains("w")) CAPQ_RETURN_IF_ERROR(Get(j, "w", &e.wake_ns));
  if (j.contains("k")) CAPQ_RETURN_IF_ERROR(Get(j, "k", &e.kernel_ns));
  if (!j.contains("data")) return Status::InvalidArgument("raw event: missing key 'data'");
  CAPQ_RETURN_IF_ERROR(BytesFrom(j["data"], "data", &e.data));
  e.truncated =
      j.contains("truncated") && j["truncated"].is_boolean() && j["truncated"].get<bool>();
  return e;
}

bool ParseRawEventLine(std::string_view line, std::string* id, SseEvent* ev) {
  internal::JsonScan scan(line);
  if (!scan.EatLiteral("{\"ev\":") || !scan.StringInto(id) || !scan.EatLiteral(",\"t\":") ||
      !scan.Int(&ev->arrival_ns) || !scan.EatLiteral(",\"w\":") || !scan.Int(&ev->wake_ns)) {
    return false;
  }
  ev->kernel_ns = 0;
  if (scan.EatLiteral(",\"k\":") && !scan.Int(&ev->kernel_ns)) return false;
  if (!scan.EatLiteral(",\"data\":") || !scan.StringInto(&ev->data)) return false;
  ev->truncated = scan.EatLiteral(",\"truncated\":true");
  return scan.Eat('}') && scan.AtEnd();
}

}  // namespace capq
