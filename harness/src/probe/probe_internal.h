// The parts of capq probe (capq/probe/probe.h) its files share: one HTTP exchange captured as
// wire bytes, the parsing of recorded bytes, the shape of an answer, and a loopback server that
// answers with recorded bytes.
#pragma once

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "capq/probe/probe.h"
#include "capq/status.h"
#include "capq/targets/control_requests.h"

namespace capq::probe {

using ojson = nlohmann::ordered_json;  // keeps the key order a server wrote

// ---- one exchange on the wire (probe_wire.cc) ------------------------------------------------

struct WireRequest {
  std::string method = "GET";
  std::string target = "/";  // path and query
  std::string body;
  std::string content_type = "application/json";  // sent with a body only
};
WireRequest Get(const std::string& target);
WireRequest Post(const std::string& target, const std::string& body,
                 const std::string& content_type = "application/json");

struct WireRead {
  double t_ms = 0;  // from just before the request was handed to libcurl
  size_t off = 0;   // offset in the response bytes
  size_t len = 0;
};

struct WireOptions {
  std::string api_key;
  bool insecure_tls = false;
  double timeout_s = 120;
};

struct WireExchange {
  std::string request_bytes;   // request line, headers and body as sent (the API key redacted)
  std::string response_bytes;  // status line, headers and body as framed on the wire
  std::vector<WireRead> reads;
  double wall_start_unix = 0;
  double t_first_byte_ms = -1;
  double t_end_ms = -1;
  long status = 0;              // 0: no answer
  std::string transport_error;  // "" = the exchange completed
};

// Sends `req` to base_url + req.target on a connection of its own and keeps every byte. libcurl's
// transfer decoding is off, so a chunked body arrives as framed; content coding is not asked for.
WireExchange Exchange(const std::string& base_url, const WireRequest& req, const WireOptions& o);
// Sends every request at once, each on its own connection and thread, released together.
std::vector<WireExchange> ExchangeTogether(const std::string& base_url,
                                           const std::vector<WireRequest>& reqs,
                                           const WireOptions& o);

// ---- recorded bytes (probe_wire.cc) ----------------------------------------------------------

struct ParsedResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // in order, names as sent
  bool has_headers = false;
  bool chunked = false;
  bool chunk_framed = false;        // chunked, and the body parsed as chunk framing
  std::string body;                 // de-chunked
  std::vector<std::string> chunks;  // every HTTP chunk's payload (chunk_framed only)
  bool complete = false;            // Content-Length met or the last chunk seen
  std::string Header(const std::string& name) const;  // "" when absent
  bool HasHeader(const std::string& name) const;
};
ParsedResponse ParseResponse(const std::string& bytes);

struct ParsedRequest {
  std::string method, target, body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string Header(const std::string& name) const;
};
ParsedRequest ParseRequest(const std::string& bytes);

std::string ReadFileBytes(const std::string& path);
Status WriteFileBytes(const std::string& path, const std::string& bytes);

// ---- what probe asks (probe_plan.cc) ---------------------------------------------------------

struct PlannedExchange {
  std::string name;  // "03-props": the corpus's file stem
  std::string kind;  // "health", "models", "info", "metrics", "tokenize", "template", "flush",
                     // "chat_c1", "chat_burst", "over_context"
  WireRequest req;
  std::string what;  // for INDEX.md
};

std::string ProbePrompt(int i);      // a short distinct prompt, tagged by `i`
std::string PseudoWords(int64_t n);  // "w0 w1 ... w<n-1>"
std::string TwoDigits(int i);        // "07"
// The control requests the engine's adapter makes (targets/control_requests.h), with the probe's
// own samples, for a server of `slots` slots.
ControlRequests ProbeControls(const ProbeEngine& e, int slots);
PlannedExchange FromControl(const ControlRequest& c);
std::vector<PlannedExchange> FromControls(const std::vector<ControlRequest>& controls);
// /health, /v1/models, the adapter's info documents, the simulator's identity, /metrics.
std::vector<PlannedExchange> InfoExchanges(const ProbeEngine& e);
PlannedExchange ChatExchange(const std::string& name, const std::string& kind,
                             const std::string& model, int prompt_index, int max_tokens,
                             const std::string& what);
PlannedExchange OverContextExchange(const std::string& model, int64_t words, int max_tokens);
// A chat body with its last message's content replaced by `content`; `model` set when not empty.
std::string WithContent(const std::string& body, const std::string* content,
                        const std::string& model);

// ---- the corpus on disk (probe_corpus.cc) ----------------------------------------------------

struct RecordedExchange {
  PlannedExchange plan;
  WireExchange wire;
};

struct CorpusHeader {
  std::string engine;  // ProbeEngineName()
  std::string base_url;
  std::string model;
  std::optional<int64_t> context_tokens;
  std::vector<std::string> notes;
};

// Creates `dir`; FailedPrecondition when it holds a corpus already.
Status PrepareCorpusDir(const std::string& dir);
// Writes every exchange's files, MANIFEST.jsonl and INDEX.md.
Status WriteCorpus(const std::string& dir, const CorpusHeader& header,
                   const std::vector<RecordedExchange>& exchanges);

struct CorpusExchange {
  std::string name;  // file stem, "14-chat-stream-max_tokens"
  std::string kind;  // from MANIFEST.jsonl; "" when it names none
  ParsedRequest request;
  std::string response_bytes;  // "" when nothing was received
  ParsedResponse response;
};
// Every NN-name.req of `dir` with its .resp, in name order (the recorded order).
Result<std::vector<CorpusExchange>> LoadCorpus(const std::string& dir);

// ---- shapes (probe_shape.cc) -----------------------------------------------------------------

// A JSON value's type as a client tells it apart: null, bool, number, string, array, object.
std::string TypeName(const ojson& v);

// Where `got` (capq's) differs in shape from `want` (recorded): value types, key sets (null and
// absent told apart), empty versus non-empty arrays, the values of keys that name a kind
// ("object", "finish_reason", "role", "type"), and with `key_order` the order of keys at the top
// level and in "choices" (where a dialect claims it).
void JsonShapeDiff(const ojson& want, const ojson& got, const std::string& at, bool key_order,
                   std::vector<ShapeDifference>* out);

struct SseEvent {
  std::string data;  // the joined data lines
  bool comment = false;
};
// One kind per event: R role, C content, F finish, U usage, E error, D [DONE], ':' comment
// (keep-alive), '?' anything else.
char EventKind(const SseEvent& e);
std::vector<SseEvent> SseEvents(const std::string& text);
// The kinds of every event in order, runs folded: "R C F U D".
std::string KindSequence(const std::vector<SseEvent>& events);
// The kinds each HTTP chunk completes, runs of equal chunks folded: "RC C FU D".
std::string ChunkGrouping(const std::vector<std::string>& chunks);

// Metric names of a Prometheus text ("# TYPE" lines and sample names).
std::vector<std::string> MetricNames(const std::string& text);

// Compares one recorded answer with capq's answer to the same request.
void CompareAnswers(const std::string& file, const ParsedResponse& want, const ParsedResponse& got,
                    bool key_order, std::vector<ShapeDifference>* out);

// ---- recorded answers served back (probe_replay.cc) ------------------------------------------

struct RecordedAnswer {
  std::string method, target;  // what it answered
  std::string response_bytes;
};

// A loopback HTTP/1.1 server that answers each request with the recorded bytes for its method and
// target (several in recorded order, the last one repeated), and 404 for anything else.
// Thread safety: one thread accepts, one serves each connection; misses() may be called anytime.
class ReplayServer {
 public:
  static Result<std::unique_ptr<ReplayServer>> Start(std::vector<RecordedAnswer> answers);
  ~ReplayServer();
  ReplayServer(const ReplayServer&) = delete;
  ReplayServer& operator=(const ReplayServer&) = delete;
  std::string url() const;
  // "METHOD target" of every request no recorded answer matched, in arrival order.
  std::vector<std::string> misses() const;

  struct State;

 private:
  explicit ReplayServer(std::unique_ptr<State> s);
  std::unique_ptr<State> state_;
};

// What the engine's adapter learns of a server: the model to ask for, its context (the longest
// prompt it takes, in tokens), and llama.cpp's slots (1 elsewhere).
struct ServerView {
  std::string model = "default";
  std::optional<int64_t> context_tokens;
  int slots = 1;
  std::string facts_error;  // "" = Facts() answered
};
ServerView LearnServer(const ProbeEngine& engine, const std::string& url,
                       const std::string& api_key, bool insecure_tls);

// Runs the engine's adapter (Facts, CountTokens, RenderedTokenIds, the metrics it reads, Flush)
// on the recorded answers and on the reference, and adds each difference in what they made of it.
void CompareAdapter(const ProbeEngine& engine, const std::vector<RecordedAnswer>& recorded,
                    const std::string& reference_url, std::vector<ShapeDifference>* out,
                    std::vector<std::string>* notes);

}  // namespace capq::probe
