// One recorded answer against capq's answer to the same request (probe_internal.h): status,
// content type, framing, then the body by its kind (an event stream, JSON, Prometheus text, other
// text).
#include <strings.h>

#include <algorithm>
#include <map>
#include <set>

#include "probe_internal.h"

namespace capq::probe {
namespace {

std::string Framing(const ParsedResponse& r) {
  if (r.chunked) return "chunked";
  return r.HasHeader("Content-Length") ? "content-length" : "close-delimited";
}

std::string ContentType(const ParsedResponse& r) {
  return r.HasHeader("Content-Type") ? r.Header("Content-Type") : "(none)";
}

bool IsEventStream(const ParsedResponse& r) {
  return strncasecmp(r.Header("Content-Type").c_str(), "text/event-stream", 17) == 0;
}

std::string BodyKind(const std::string& body) {
  if (body.empty()) return "empty";
  const ojson j = ojson::parse(body, nullptr, false);
  return j.is_discarded() ? "text" : "JSON " + TypeName(j);
}

bool IsPrometheus(const std::string& body) {
  return body.rfind("# HELP ", 0) == 0 || body.rfind("# TYPE ", 0) == 0;
}

// Metric names capq's dialect serves that the server does not: the other way is not a difference,
// as the simulator serves only the metrics capq reads.
void CompareMetrics(const std::string& want, const std::string& got,
                    std::vector<ShapeDifference>* out) {
  const std::vector<std::string> w = MetricNames(want);
  for (const std::string& name : MetricNames(got)) {
    if (!std::binary_search(w.begin(), w.end(), name)) {
      out->push_back({"", "metric " + name, "absent", "served"});
    }
  }
}

// Every recorded event against capq's first event of its kind.
void CompareEventShapes(const std::vector<SseEvent>& want, const std::vector<SseEvent>& got,
                        bool key_order, std::vector<ShapeDifference>* out) {
  std::map<char, ojson> capq_first;
  for (const SseEvent& e : got) {
    const char k = EventKind(e);
    if (k == 'D' || k == ':' || capq_first.count(k)) continue;
    const ojson j = ojson::parse(e.data, nullptr, false);
    if (!j.is_discarded()) capq_first.emplace(k, j);
  }
  for (const SseEvent& e : want) {
    const char k = EventKind(e);
    auto it = capq_first.find(k);
    if (it == capq_first.end()) continue;  // the kind sequence already says so
    const ojson j = ojson::parse(e.data, nullptr, false);
    if (j.is_discarded()) continue;
    JsonShapeDiff(j, it->second, std::string("event ") + k + " $", key_order, out);
  }
}

void CompareStreams(const ParsedResponse& want, const ParsedResponse& got, bool key_order,
                    std::vector<ShapeDifference>* out) {
  const std::vector<SseEvent> w = SseEvents(want.body), g = SseEvents(got.body);
  const std::string wk = KindSequence(w), gk = KindSequence(g);
  if (wk != gk) out->push_back({"", "event kinds", wk, gk});
  if (want.chunk_framed && got.chunk_framed) {
    const std::string wc = ChunkGrouping(want.chunks), gc = ChunkGrouping(got.chunks);
    if (wc != gc) out->push_back({"", "events per HTTP chunk", wc, gc});
  }
  CompareEventShapes(w, g, key_order, out);
}

void CompareBodies(const ParsedResponse& want, const ParsedResponse& got, bool key_order,
                   std::vector<ShapeDifference>* out) {
  if (IsEventStream(want) && IsEventStream(got)) {
    CompareStreams(want, got, key_order, out);
    return;
  }
  const std::string wk = BodyKind(want.body), gk = BodyKind(got.body);
  if (wk != gk) {
    out->push_back({"", "body", wk, gk});
    return;
  }
  if (wk.rfind("JSON", 0) == 0) {
    JsonShapeDiff(ojson::parse(want.body), ojson::parse(got.body), "$", false, out);
  } else if (IsPrometheus(want.body) && IsPrometheus(got.body)) {
    CompareMetrics(want.body, got.body, out);
  }
}

}  // namespace

void CompareAnswers(const std::string& file, const ParsedResponse& want, const ParsedResponse& got,
                    bool key_order, std::vector<ShapeDifference>* out) {
  std::vector<ShapeDifference> found;
  if (!got.has_headers) {
    found.push_back({"", "answer", "HTTP " + std::to_string(want.status), "none"});
  } else {
    if (want.status != got.status) {
      found.push_back({"", "status", std::to_string(want.status), std::to_string(got.status)});
    }
    if (strcasecmp(ContentType(want).c_str(), ContentType(got).c_str()) != 0) {
      found.push_back({"", "content-type", ContentType(want), ContentType(got)});
    }
    if (Framing(want) != Framing(got)) {
      found.push_back({"", "framing", Framing(want), Framing(got)});
    }
    // Two different statuses answer different questions: their bodies are not compared.
    if (want.status == got.status) CompareBodies(want, got, key_order, &found);
  }
  std::set<std::string> seen;
  for (ShapeDifference& d : found) {
    d.file = file;
    if (seen.insert(d.Line()).second) out->push_back(std::move(d));
  }
}

}  // namespace capq::probe

namespace capq {

std::string ShapeDifference::Line() const {
  return file + ": " + what + ": recorded " + recorded + ", capq " + capq;
}

}  // namespace capq
