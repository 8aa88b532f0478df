// The corpus on disk (probe_internal.h), in the format of tests/data/conformance/llamacpp/:
// NN-name.req, NN-name.resp, NN-name.times.jsonl for streams, MANIFEST.jsonl and INDEX.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

#include "capq/clock.h"
#include "probe_internal.h"

namespace capq::probe {
namespace {

namespace fs = std::filesystem;

ojson Ms(double ms) { return ms < 0 ? ojson() : ojson(std::round(ms * 1000) / 1000); }

bool IsStream(const ParsedResponse& r) {
  return r.Header("Content-Type").rfind("text/event-stream", 0) == 0;
}

std::string FramingName(const ParsedResponse& r) {
  if (r.chunked) return "chunked";
  return r.HasHeader("Content-Length") ? "cl" : "close";
}

ojson ManifestEntry(const std::string& engine, const RecordedExchange& e) {
  const ParsedResponse r = ParseResponse(e.wire.response_bytes);
  const WireExchange& w = e.wire;
  const std::string& n = e.plan.name;
  ojson m = ojson::object();
  m["name"] = n;
  m["files"] = IsStream(r) ? ojson::array({n + ".req", n + ".resp", n + ".times.jsonl"})
                           : ojson::array({n + ".req", n + ".resp"});
  m["engine"] = engine;
  m["kind"] = e.plan.kind;
  m["request"] = e.plan.req.method + " " + e.plan.req.target;
  m["status"] = w.status ? ojson(w.status) : ojson();
  m["framing"] = r.has_headers ? ojson(FramingName(r)) : ojson();
  m["end"] = w.transport_error.empty() ? "complete" : "error";
  m["framing_complete"] = r.complete;
  m["bytes"] = w.response_bytes.size();
  m["recv_calls"] = w.reads.size();
  m["t_first_byte_ms"] = Ms(w.t_first_byte_ms);
  m["t_end_ms"] = Ms(w.t_end_ms);
  m["wall_clock_start_unix"] = std::round(w.wall_start_unix * 1e6) / 1e6;
  m["content_type"] = r.HasHeader("Content-Type") ? ojson(r.Header("Content-Type")) : ojson();
  m["wire"] = "raw";
  if (IsStream(r)) {
    const std::vector<SseEvent> events = SseEvents(r.body);
    m["sse_events"] = events.size();
    m["event_kinds"] = KindSequence(events);
    m["events_per_chunk"] = ChunkGrouping(r.chunks);
    m["done_marker"] = !events.empty() && events.back().data == "[DONE]";
  }
  m["socket_error"] = w.transport_error.empty() ? ojson() : ojson(w.transport_error);
  return m;
}

std::string TimesJsonl(const WireExchange& w) {
  std::string out;
  char line[160];
  for (size_t i = 0; i < w.reads.size(); ++i) {
    std::snprintf(line, sizeof line, "{\"i\": %zu, \"t_ms\": %.3f, \"off\": %zu, \"len\": %zu}\n",
                  i, w.reads[i].t_ms, w.reads[i].off, w.reads[i].len);
    out += line;
  }
  return out;
}

constexpr char kFormat[] = R"(## File format

The format of capq's `tests/data/conformance/llamacpp/` corpus:

* `NN-what.req`: the request bytes as libcurl wrote them (request line, headers, body). An
  `Authorization` header shows `<redacted>`.
* `NN-what.resp`: the response bytes as framed on the wire: status line, headers, body. libcurl's
  transfer decoding was off, so a chunked answer keeps its chunk-size lines and the final `0` chunk;
  de-chunk before parsing SSE. No content coding was asked for. Over TLS these are the decrypted
  bytes.
* `NN-what.times.jsonl` (streams): one line per piece libcurl handed over as it read the socket
  (the header block is one line), `{"i","t_ms","off","len"}`; `t_ms` counts from just before the
  request was handed to libcurl, so the first one includes the connection setup.
* `MANIFEST.jsonl`: one object per exchange: engine, kind, status, framing, bytes, times, and for
  streams the event kinds (R role, C content, e empty delta, F finish, U usage, E error, D [DONE],
  `:` comment) in order and per HTTP chunk.

Exchanges sharing a number (the burst) were sent at once; the others one after another.
)";

std::string IndexMarkdown(const CorpusHeader& h, const std::vector<RecordedExchange>& ex) {
  std::ostringstream o;
  o << "# `" << h.engine << "` conformance corpus recorded by `capq probe`\n\n"
    << "Recorded " << FormatUtc(RealtimeAnchor::Take().unix_ns) << " from " << h.base_url
    << " with `capq probe " << h.base_url << " --engine " << h.engine << "`.\n"
    << "Served model `" << h.model << "`; context "
    << (h.context_tokens ? std::to_string(*h.context_tokens) + " tokens" : "not reported")
    << ".\n\nCheck it with `capq probe --check DIR`; send it back by attaching this folder "
    << "(zipped) to an issue.\n\n"
    << kFormat << "\n## Exchanges\n\n| name | status | what | files |\n|---|---|---|---|\n";
  for (const RecordedExchange& e : ex) {
    const ParsedResponse r = ParseResponse(e.wire.response_bytes);
    o << "| " << e.plan.name << " | "
      << (e.wire.status ? std::to_string(e.wire.status) : "none: " + e.wire.transport_error)
      << " | " << e.plan.what << " | `" << e.plan.name << ".req` `" << e.plan.name << ".resp`"
      << (IsStream(r) ? " `" + e.plan.name + ".times.jsonl`" : "") << " |\n";
  }
  if (!h.notes.empty()) o << "\n## Notes\n\n";
  for (const std::string& n : h.notes) o << "* " << n << "\n";
  return o.str();
}

}  // namespace

Status PrepareCorpusDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IoError(dir + ": cannot create (" + ec.message() + ")");
  if (fs::exists(fs::path(dir) / "MANIFEST.jsonl")) {
    return Status::FailedPrecondition(dir + " holds a corpus already: choose another --out");
  }
  return Status::Ok();
}

Status WriteCorpus(const std::string& dir, const CorpusHeader& header,
                   const std::vector<RecordedExchange>& exchanges) {
  const fs::path d(dir);
  std::string manifest;
  for (const RecordedExchange& e : exchanges) {
    const std::string stem = (d / e.plan.name).string();
    CAPQ_RETURN_IF_ERROR(WriteFileBytes(stem + ".req", e.wire.request_bytes));
    CAPQ_RETURN_IF_ERROR(WriteFileBytes(stem + ".resp", e.wire.response_bytes));
    if (IsStream(ParseResponse(e.wire.response_bytes))) {
      CAPQ_RETURN_IF_ERROR(WriteFileBytes(stem + ".times.jsonl", TimesJsonl(e.wire)));
    }
    manifest += ManifestEntry(header.engine, e).dump() + "\n";
  }
  CAPQ_RETURN_IF_ERROR(WriteFileBytes((d / "MANIFEST.jsonl").string(), manifest));
  return WriteFileBytes((d / "INDEX.md").string(), IndexMarkdown(header, exchanges));
}

namespace {

// name -> MANIFEST.jsonl entry.
std::map<std::string, ojson> ReadManifest(const std::string& dir) {
  std::map<std::string, ojson> out;
  std::istringstream in(ReadFileBytes((fs::path(dir) / "MANIFEST.jsonl").string()));
  std::string line;
  while (std::getline(in, line)) {
    const ojson j = ojson::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.contains("name") && j["name"].is_string()) {
      out[j["name"].get<std::string>()] = j;
    }
  }
  return out;
}

}  // namespace

Result<std::vector<CorpusExchange>> LoadCorpus(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::NotFound(dir + ": no such directory");
  std::vector<std::string> stems;
  for (const fs::directory_entry& f : fs::directory_iterator(dir, ec)) {
    if (f.path().extension() == ".req") stems.push_back(f.path().stem().string());
  }
  if (stems.empty()) return Status::NotFound(dir + ": no .req files (not a corpus)");
  std::sort(stems.begin(), stems.end());
  const std::map<std::string, ojson> manifest = ReadManifest(dir);
  std::vector<CorpusExchange> out;
  for (const std::string& stem : stems) {
    CorpusExchange e;
    e.name = stem;
    const std::string base = (fs::path(dir) / stem).string();
    e.request = ParseRequest(ReadFileBytes(base + ".req"));
    e.response_bytes = ReadFileBytes(base + ".resp");
    e.response = ParseResponse(e.response_bytes);
    auto m = manifest.find(stem);
    if (m != manifest.end()) e.kind = m->second.value("kind", "");
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace capq::probe

namespace capq {

int CorpusBuild(const std::string& dir, const ProbeEngine& engine) {
  std::istringstream in(
      probe::ReadFileBytes((std::filesystem::path(dir) / "MANIFEST.jsonl").string()));
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || j.value("kind", "") != "info") continue;
    const std::string request = j.value("request", "");
    const auto files = j.value("files", std::vector<std::string>{});
    if (request.rfind("GET ", 0) != 0 || files.size() < 2) continue;
    const probe::ParsedResponse r = probe::ParseResponse(
        probe::ReadFileBytes((std::filesystem::path(dir) / files[1]).string()));
    const nlohmann::json doc = nlohmann::json::parse(r.body, nullptr, false);
    if (const int build = ReportedBuildNumber(engine.dialect, request.substr(4), doc); build > 0) {
      return build;
    }
  }
  return 0;
}

Result<ProbeEngine> CorpusEngine(const std::string& dir) {
  std::istringstream in(
      probe::ReadFileBytes((std::filesystem::path(dir) / "MANIFEST.jsonl").string()));
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.contains("engine") && j["engine"].is_string()) {
      return ParseProbeEngine(j["engine"].get<std::string>());
    }
  }
  return Status::NotFound(dir + "/MANIFEST.jsonl names no engine: pass --engine");
}

}  // namespace capq
