// The simulated server's shared internals: the state of one chat stream and the server's
// loop-thread state. Where each part lives:
//   server.cc           SimServer: start-up, accessors, stop
//   server_loop.cc      the loop: its callbacks, the engine driving, a stream's connection
//   server_routes.cc    a path to its endpoint; the endpoints all dialects share but chat
//   server_chat.cc      the chat endpoint: a request becomes a stream in the engine
//   chat_request.cc     a chat request's messages and options read and checked
//   server_stream.cc    a chat reply's chunks: framing, tokens, mid-stream faults, finish, usage
//   server_write.cc     how a stream's frames reach its socket, and the truth log of the writes
//   server_http.cc      the HTTP answers every endpoint shares, in the dialect's shape
//   server_faults.cc    the triggers of the faults that change a stream's shape
//   server_llamacpp.cc  the endpoints only llama.cpp has
//   chunk_parts.cc      the constant pieces of a stream's chunks
#pragma once

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "capq/clock.h"
#include "capq/engine/engine.h"
#include "capq/engine/profile.h"
#include "capq/sim/dialect.h"
#include "capq/sim/faults.h"
#include "capq/sim/server.h"
#include "capq/sim/tokenizer.h"
#include "capq/sim/truth_log.h"
#include "capq/sim/variations.h"
#include "gzip_stream.h"

namespace capq::sim {

using json = nlohmann::json;

// The engine model's names the server code uses throughout. Its class stays qualified
// (engine::Engine): capq::Engine is the row's engine kind.
using engine::CacheModel;
using engine::EngineEvent;
using engine::EngineProfile;
using engine::EngineRequest;
using engine::EngineStats;
using engine::SlotState;
using engine::VirtNs;

inline constexpr double kTtftBucketsS[] = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,  0.75, 1.0,  2.5,   5.0,
    7.5,   10.0,  15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120., 240., 480., 960., 1920., 7680.};
inline constexpr size_t kTtftBuckets = sizeof(kTtftBucketsS) / sizeof(kTtftBucketsS[0]);

// llama.cpp's build_info and system_fingerprint slot: the sim's own name, never a real build.
inline constexpr const char* kSimFingerprint = "capq-sim";

enum class FinishKind { kNone = 0, kLength = 1, kStop = 2 };

// The constant pieces of a stream's chunks (chunk_parts.cc); arrays are indexed by FinishKind.
struct ChunkParts {
  std::string role_choice;          // the role chunk's choice object
  std::string content_open[3];      // a content choice up to its text's opening quote
  std::string content_close[3];     // from the text's closing quote to the choice's end
  std::string content_open_index1;  // content_open[0] naming choice index 1 (wrong_index fault)
  std::string finish_choice[3];     // the finish chunk's choice ([0] unused)
  std::string chunk_close[2];       // after a stream's tail: by frame parity (usage_key mixed)
};
ChunkParts BuildChunkParts(const DialectSpec& spec, const StreamVariation& v);

struct Stream;

// The HTTP plumbing (server_http.cc): a request's body, a status's reason phrase, and the
// dialect's error object (what a stream's error frame wraps in {"error": ...}) and error body.
std::string BodyOf(evhttp_request* req);
const char* ReasonPhrase(int status);
json ErrorInner(ErrorStyle style, int status, const std::string& message);
std::string ErrorBody(ErrorStyle style, int status, const std::string& message);

// The loop's callbacks that start-up registers (server_loop.cc): the engine timer, every request,
// and the stop event Stop() wakes.
void OnEngineTimer(evutil_socket_t, short, void* arg);
void OnRequest(evhttp_request* req, void* arg);
void OnStop(evutil_socket_t, short, void* arg);

// Streaming (server_stream.cc): a number's digits appended, and whether a mid-stream fault acts
// once `count` output tokens are out.
void AppendInt(std::string* out, int64_t v);
bool FaultDue(const RequestFaults& f, int64_t count);

// Stream-shape fault triggers (server_faults.cc).
void TruncatePrompt(const RequestFaults& f, std::vector<uint32_t>* ids);
// The words of a content chunk of `words` tokens from `first` that carry text.
int64_t HollowWords(const RequestFaults& f, int64_t first, int64_t words);
void AppendPromptDetails(const Stream* s, std::string* usage);

// A chat request's messages (chat_request.cc): every message's content + "\n", joined (what faults
// match on), and the messages themselves for the per-message chat template (sim/tokenizer.h);
// false and a reason when a message is malformed.
bool MessagesText(const json& messages, std::string* text, std::string* error,
                  std::vector<ChatMessage>* parsed = nullptr);

// One chat completion request, from arrival to the end of its answer.
struct Stream {
  SimServer::Impl* impl = nullptr;
  evhttp_request* req = nullptr;  // null once the connection is gone
  evhttp_connection* conn = nullptr;
  event* eof_watch = nullptr;
  event* delay_timer = nullptr;  // slow_first_byte
  uint64_t engine_id = 0;
  int64_t index = 0;
  std::string id;    // "chatcmpl-..."
  std::string head;  // every chunk's JSON up to the choices array's first element
  std::string tail;  // from the choices array's closing bracket up to the chunk's last keys
  bool streaming = false;
  bool include_usage = false;
  int64_t prompt_tokens = 0;
  int64_t max_tokens = 0;
  bool ignore_eos = false;
  double temperature = 1.0;
  int64_t eos_at = -1;        // the output length at which it stops with "stop" (-1: never)
  bool eos_is_token = false;  // llama.cpp: that last token is the EOS and has no text
  int slot = -1;              // cache_model slots: the engine slot running it
  uint64_t out_hash = 0;      // output text key: prompt hash (or the duplicated prompt's)
  uint64_t out_seed = 0;
  RequestFaults faults;
  StreamVariation var;                // how this stream is framed (variations.h)
  const ChunkParts* parts = nullptr;  // the server's, or own_parts when var differs from its
  std::unique_ptr<ChunkParts> own_parts;
  EngineRequest pending;  // the engine request, until submitted
  // Progress.
  bool in_engine = false;  // submitted and not finished/rejected/cancelled
  bool headers_sent = false;
  bool role_sent = false;
  bool stalled = false;  // stall fault: the connection stays open, silent
  bool malformed_sent = false;
  bufferevent* bev = nullptr;  // set once the headers are out: chunks are appended to it directly
  // Truth log: frames handed to `bev` and not yet written to the socket, each with the count of
  // output bytes drained once its last byte is out (see SimServer::Impl::OnDrained).
  struct Unwritten {
    uint64_t written_at;
    int64_t index;
    int64_t virtual_ns;
    int64_t handover_ns;
  };
  std::deque<Unwritten> unwritten;
  uint64_t drained = 0;  // bytes of bev's output written to the socket since the watch began
  evbuffer_cb_entry* drain_watch = nullptr;
  bool chunked = true;
  std::unique_ptr<internal::GzipStream> gzip;  // gzip fault: the body's coder, once headers are out
  int64_t cached_tokens = 0;
  int64_t emitted = 0;  // output tokens the engine produced so far
  // Output tokens produced but not sent yet (a stream interval, a slow reader, the last text held
  // for the finish chunk): tokens [held_first, held_first + held).
  int64_t held_first = 0;
  int64_t held = 0;
  int64_t frame_index = 0;
  VirtNs arrival_v = 0;
  VirtNs admitted_v = -1;
  VirtNs first_token_v = -1;
  std::string content;  // non-streaming: the whole text
};

struct SimServer::Impl {
  ServerOptions opts;
  EngineProfile profile;
  std::string digest;
  const DialectSpec* spec = nullptr;
  FaultPlan faults;
  TruthLog truth;
  std::string model_json;  // served_model_name as a JSON string literal

  event_base* base = nullptr;
  evhttp* http = nullptr;
  evconnlistener* listener = nullptr;
  event* engine_timer = nullptr;
  event* stop_event = nullptr;
  int stop_fd = -1;  // an eventfd: Stop() writes it from another thread to wake the loop
  evbuffer* scratch = nullptr;
  std::thread thread;
  int port = 0;
  int listen_backlog = 0;
  MonoNs t0 = 0;
  int64_t start_unix_ns = 0;
  double scale = 1.0;
  timeval idle_timeout{};  // opts.idle_timeout_s: a keep-alive connection's wait for a request
  std::atomic<bool> stopped{false};
  std::mutex stop_mu;

  std::unique_ptr<engine::Engine> engine;
  std::vector<EngineEvent> events;
  VirtNs last_v = 0;
  std::optional<VirtNs> timer_at;
  std::unordered_map<uint64_t, std::unique_ptr<Stream>> streams;
  int64_t next_index = 0;
  uint64_t next_engine_id = 1;
  int delayed = 0;  // slow_first_byte requests not yet submitted: they make the server busy
  bool erase_pending = false;       // llama.cpp: an erase asked while busy, done once idle
  std::vector<int> slots_to_erase;  // cache_model slots: erases of busy slots, done once idle
  // What /slots shows of each slot's last task (cache_model slots).
  struct SlotTask {
    int64_t id_task = -1;
    int64_t n_predict = -1;
    bool ignore_eos = false;
    bool stream = false;
    double temperature = 0.8;
    int64_t n_prompt_tokens_processed = 0;
    int64_t n_decoded = 0;
  };
  std::vector<SlotTask> slot_tasks;
  ChatTemplate tmpl;
  // llama.cpp's /metrics counters (virtual seconds).
  double lc_prompt_s_total = 0;
  double lc_predicted_s_total = 0;
  int64_t lc_prompt_n_total = 0;
  int64_t lc_n_tokens_max = 0;
  int64_t flush_base_prompt = 0;
  int64_t flush_base_cached = 0;

  // Metrics (virtual seconds).
  int64_t ttft_counts[kTtftBuckets + 1] = {};
  double ttft_sum_s = 0;
  int64_t ttft_count = 0;

  mutable std::mutex snap_mu;
  EngineStats snapshot;
  std::atomic<int64_t> requests_received{0};

  std::string frame;  // reused frame buffer
  // How streams are framed: the dialect's own variation and its chunk parts; in varied mode each
  // stream draws its own (variations.h).
  StreamVariation dialect_var;
  ChunkParts parts;
  // Whether usage reports cached tokens at all (SGLang --enable-cache-report, vLLM
  // --enable-prompt-tokens-details), and the form it takes when it does not.
  bool counts_reported = true;
  CachedZero unreported_form = CachedZero::kNull;

  ~Impl();

  VirtNs VirtNow() const { return static_cast<VirtNs>(static_cast<double>(NowNs() - t0) * scale); }
  MonoNs DueMono(VirtNs v) const {
    return t0 + static_cast<MonoNs>(static_cast<double>(v) / scale);
  }
  bool Busy() const { return !engine->Idle() || delayed > 0; }

  // The loop (server_loop.cc): the engine driving, and a stream's connection from its watch to
  // its end.
  void Pump(VirtNs now);
  void Rearm();
  void Dispatch(const EngineEvent& e);
  void Snapshot();
  void SubmitStream(Stream* s);
  void WatchConnection(Stream* s);
  void DelaySubmit(Stream* s, double delay_ms);
  void Forget(Stream* s);
  void CutNow(Stream* s);
  void ClientGone(Stream* s);
  // Streams whose last frame went out in this Pump; their replies end after the step's writes.
  // No I/O callback runs inside Pump, so nothing else can forget them in between.
  std::vector<Stream*> finished;

  // Streaming (server_stream.cc).
  void ChooseFraming();
  void ChooseVariation(Stream* s);
  void SetChunkHeadAndTail(Stream* s) const;
  void OnTokens(Stream* s, const EngineEvent& e);
  void CountFirstToken(Stream* s, VirtNs t);
  bool HoldBack(const Stream* s) const;
  // Sends the held tokens as one content chunk, with `finish` on it (the role chunk first if it is
  // still due). False if the stream is gone or silent.
  bool SendHeld(Stream* s, VirtNs v, FinishKind finish);
  void BeginRoleFrame(Stream* s);  // the role chunk, in `frame`
  void SendRole(Stream* s, VirtNs v);
  bool SendAndApplyFaults(Stream* s, int64_t count, VirtNs v);
  void SendErrorFrameAndEnd(Stream* s, int status, const std::string& message, VirtNs v);
  void OnFinished(Stream* s, const EngineEvent& e);
  bool SendFinishAndUsage(Stream* s, const char* reason, VirtNs t);
  void AppendUsageChunk(Stream* s, VirtNs t);
  std::string UsageJson(const Stream* s) const;
  std::string TimingsJson(const Stream* s, VirtNs finish_v) const;
  void AnswerWhole(Stream* s, const char* reason, VirtNs t);
  std::string NonStreamBody(const Stream* s, const char* finish_reason, VirtNs finish_v) const;
  void OnRejected(Stream* s, const EngineEvent& e);

  // Writing a stream's frames to its socket (server_write.cc).
  void StartReply(Stream* s);
  void WriteFrame(Stream* s, std::string_view payload, VirtNs v,
                  void (*done_cb)(evhttp_connection*, void*) = nullptr);
  // The hot path builds a frame's payload in place: BeginFrame, append, SendFrame.
  // The frame starts kFrameRoom bytes into `frame`: room for the chunk-size line in front.
  static constexpr size_t kFrameRoom = 18;
  std::string& BeginFrame() {
    frame_count = 1;
    frame.assign(kFrameRoom, ' ');
    frame += "data: ";
    return frame;
  }
  // Several frames can share one HTTP chunk (llama.cpp): NextFrame starts another in `frame`.
  std::string& NextFrame() {
    frame += "\n\ndata: ";
    ++frame_count;
    return frame;
  }
  int frame_count = 1;
  void SendFrame(Stream* s, VirtNs v, void (*done_cb)(evhttp_connection*, void*) = nullptr);
  void FlushStaged();
  static void WriteNow(bufferevent* bev);  // writes what its output holds, now
  void SendComment(Stream* s);  // an SSE comment (": ping") outside the truth log's frames
  // Truth log: each staged frame is logged once the socket write that carried it returns.
  void WatchWrites(Stream* s);
  void LogUnwritten(Stream* s, MonoNs written_ns);  // every frame written by now (0: unknown)
  static void OnDrained(evbuffer* buf, const evbuffer_cb_info* info, void* arg);
  // Frames built but not yet written, all of one stream (see SendFrame).
  struct StagedTruth {
    int64_t index;
    VirtNs v;
  };
  Stream* staged_stream = nullptr;
  std::string staged;
  std::vector<StagedTruth> staged_truth;
  void EndReply(Stream* s);
  // Every reply ends with this: the keep-alive timeout comes back once it is written out in full.
  void IdleOnceWritten(evhttp_request* req);
  static void OnReplyWritten(evhttp_request* req, void* arg);

  // Stream-shape faults (server_faults.cc).
  std::string_view ChunkModelJson(const Stream* s) const;
  std::string_view ContentOpen(const Stream* s, int64_t first, int64_t words,
                               FinishKind finish) const;
  void AppendFaultChoices(const Stream* s, int64_t first, int64_t words, std::string* f) const;
  void AppendChunkClose(const Stream* s, std::string* f) const;
  void DecorateEvent(const Stream* s);  // on the frame in `frame`, before it is sent
  void SendAfterDone(Stream* s, VirtNs v);
  // split_utf8: appends the two-byte character to the chunk's text when it holds the token, and
  // says whether it did (then SendSplitFrame sends that chunk).
  bool AppendSplitUtf8(const Stream* s, int64_t first, int64_t words, std::string* f) const;
  void SendSplitFrame(Stream* s, VirtNs v);
  // Framing and coding faults (gzip, close_delimited): the reply's headers and version before
  // they go out, each piece of the body as it goes out, and what the body ends with.
  void PrepareFaultReply(Stream* s);
  void EncodeBody(Stream* s, std::string* bytes, size_t from);
  std::string BodyCoda(Stream* s);

  // The HTTP answers every endpoint shares (server_http.cc).
  void Reply(evhttp_request* req, int status, const std::string& body, const char* content_type);
  void ReplyError(evhttp_request* req, int status, const std::string& message);
  void ReplyJsonError(evhttp_request* req, int status, json error);
  void AddDialectHeaders(evkeyvalq* h, int status) const;
  std::string InvalidJsonMessage(const json::exception& e) const;
  // Parses a JSON object body, or answers the error and returns false.
  bool ParseBody(evhttp_request* req, json* body);

  // The routes and the endpoints all dialects share (server_routes.cc).
  void Handle(evhttp_request* req);
  const Route* FindRoute(const std::string& path) const;
  void Serve(Endpoint endpoint, evhttp_request* req, const std::string& path);
  void HandleHealth(evhttp_request* req);
  void HandleModels(evhttp_request* req);
  void HandleServerInfo(evhttp_request* req);
  void HandleVersion(evhttp_request* req);
  void HandleFlush(evhttp_request* req);
  bool DoFlush();
  void HandleTokenize(evhttp_request* req);
  void HandleMetrics(evhttp_request* req);
  void AppendTtftHistogram(const char* labels, std::string* out) const;
  void AppendCacheConfigInfo(std::string* out) const;
  void HandleCapqSim(evhttp_request* req);
  json CapqSimInfo() const;

  // The chat endpoint (server_chat.cc) and its request's checks (chat_request.cc).
  void HandleChat(evhttp_request* req);
  bool ReplyJsonError200(evhttp_request* req, const RequestFaults& f);
  struct ChatOptions {
    bool streaming = false;
    bool ignore_eos = false;
    bool include_usage = false;
    double temperature = 1.0;
    int64_t seed = 0;
    int64_t max_tokens = 0;
  };
  std::unique_ptr<Stream> NewStream(evhttp_request* req, int64_t index, const ChatOptions& o,
                                    const RequestFaults& f, std::vector<uint32_t> ids,
                                    int64_t max_tokens);
  bool ParseChatOptions(evhttp_request* req, const json& body, ChatOptions* o);
  bool ParseMaxTokens(evhttp_request* req, const json* given, const char* key, int64_t* out);
  bool ParseStreamOptions(evhttp_request* req, const json& so, bool streaming, bool* include_usage);
  bool FitContext(evhttp_request* req, int64_t prompt_tokens, int64_t* max_tokens);

  // llama.cpp's own shapes (server_llamacpp.cc).
  void HandleProps(evhttp_request* req);
  void HandleSlots(evhttp_request* req);
  void HandleSlotAction(evhttp_request* req, const std::string& path);
  void HandleApplyTemplate(evhttp_request* req);
  void HandleLlamacppTokenize(evhttp_request* req, const json& body);
  void HandleLlamacppModels(evhttp_request* req);
  void HandleLlamacppMetrics(evhttp_request* req);
  void OnSlotAdmitted(Stream* s);
  void OnLlamacppFinished(Stream* s, VirtNs t);
  void ErasePendingSlots();
};

}  // namespace capq::sim
