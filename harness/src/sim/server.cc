// The simulated server: SimServer's start-up and stop, and the chat endpoint. Elsewhere: the loop
// in server_loop.cc, the other endpoints in server_routes.cc, the HTTP answers they share in
// server_http.cc, the streaming of a chat reply in server_stream.cc and how its frames reach the
// socket in server_write.cc.
#include "capq/sim/server.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/http_struct.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <unordered_map>

#include "capq/clock.h"
#include "capq/log.h"
#include "capq/sim/dialect.h"
#include "capq/sim/faults.h"
#include "capq/sim/tokenizer.h"
#include "capq/sim/truth_log.h"
#include "server_impl.h"

namespace capq::sim {
namespace {

// Without max_tokens a request gets SGLang's default max_new_tokens; capq always sends it.
constexpr int64_t kDefaultMaxTokens = 128;
// Pending connections the kernel may queue for accept (capped by net.core.somaxconn).
constexpr int kListenBacklog = 4096;

}  // namespace

SimServer::Impl::~Impl() {
  for (auto& [id, s] : streams) {
    if (s->delay_timer) event_free(s->delay_timer);
    if (s->eof_watch) event_free(s->eof_watch);
  }
  streams.clear();
  if (http) evhttp_free(http);
  if (engine_timer) event_free(engine_timer);
  if (stop_event) event_free(stop_event);
  if (stop_fd >= 0) close(stop_fd);
  if (scratch) evbuffer_free(scratch);
  if (base) event_base_free(base);
}

bool MessagesText(const json& messages, std::string* text, std::string* error,
                  std::vector<ChatMessage>* parsed) {
  if (!messages.is_array() || messages.empty()) {
    *error = "'messages' must be a non-empty array";
    return false;
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      *error = at + ": each message needs a string 'role'";
      return false;
    }
    if (!m.contains("content")) {
      *error = at + ": missing 'content'";
      return false;
    }
    const json& c = m["content"];
    ChatMessage msg;
    msg.role = m["role"].get<std::string>();
    if (c.is_string()) {
      msg.content = c.get<std::string>();
    } else if (c.is_array()) {
      for (const auto& part : c) {
        if (!part.is_object() || !part.contains("text") || !part["text"].is_string()) {
          *error = at + ": content parts must be {\"type\":\"text\",\"text\":...}";
          return false;
        }
        msg.content += part["text"].get<std::string>();
      }
    } else if (!c.is_null()) {
      *error = at + ": 'content' must be a string or a list of text parts";
      return false;
    }
    *text += msg.content;
    *text += '\n';
    if (parsed) parsed->push_back(std::move(msg));
  }
  return true;
}

// The sampling and streaming fields of a chat request, validated; answers the error and returns
// false when one is wrong. max_tokens < 0 means "until the context is full" (llama.cpp's -1).
bool SimServer::Impl::ParseChatOptions(evhttp_request* req, const json& body, ChatOptions* o) {
  auto bad_type = [&](const char* key, bool ok) {
    if (body.contains(key) && !body[key].is_null() && !ok) {
      ReplyError(req, 400, std::string("'") + key + "' has the wrong type");
      return true;
    }
    return false;
  };
  if (bad_type("stream", body.value("stream", json()).is_boolean()) ||
      bad_type("ignore_eos", body.value("ignore_eos", json()).is_boolean()) ||
      bad_type("temperature", body.value("temperature", json()).is_number()) ||
      bad_type("seed", body.value("seed", json()).is_number_integer()) ||
      bad_type("max_tokens", body.value("max_tokens", json()).is_number_integer()) ||
      bad_type("max_completion_tokens",
               body.value("max_completion_tokens", json()).is_number_integer()) ||
      bad_type("stream_options", body.value("stream_options", json()).is_object()) ||
      bad_type("n", body.value("n", json()).is_number_integer())) {
    return false;
  }
  auto opt = [&](const char* key) -> const json* {
    auto it = body.find(key);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  };
  const bool streaming = opt("stream") && opt("stream")->get<bool>();
  o->streaming = streaming;
  o->ignore_eos = opt("ignore_eos") && opt("ignore_eos")->get<bool>();
  o->temperature = opt("temperature") ? opt("temperature")->get<double>() : 1.0;
  o->seed = opt("seed") ? opt("seed")->get<int64_t>() : 0;
  if (o->temperature < 0 || o->temperature > 2) {
    ReplyError(req, 400, "'temperature' must be in [0, 2]");
    return false;
  }
  if (opt("n") && opt("n")->get<int64_t>() != 1) {
    ReplyError(req, 400, "only n = 1 is supported");
    return false;
  }
  const char* max_key = opt("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (!ParseMaxTokens(req, opt(max_key), max_key, &o->max_tokens)) return false;
  if (const json* so = opt("stream_options")) {
    if (!ParseStreamOptions(req, *so, streaming, &o->include_usage)) return false;
  }
  return true;
}

// max_tokens (or max_completion_tokens, named `key`), `given` or the dialect's default.
bool SimServer::Impl::ParseMaxTokens(evhttp_request* req, const json* given, const char* key,
                                     int64_t* out) {
  const bool llamacpp = spec->dialect == Dialect::kLlamacpp;
  // llama.cpp's n_predict defaults to -1, unlimited until the slot's context is full.
  int64_t max_tokens = llamacpp ? -1 : kDefaultMaxTokens;
  if (given) max_tokens = given->get<int64_t>();
  if (llamacpp && max_tokens < -1) {
    // ts/server-schema.cpp's range check (recording 55).
    ReplyError(req, 400,
               std::string("Field '") + key +
                   "': Value must be between -1 <= value <= 2147483647, but got " +
                   std::to_string(max_tokens));
    return false;
  }
  if (!llamacpp && max_tokens < 1) {
    ReplyError(req, 400, "'max_tokens' must be at least 1");
    return false;
  }
  // llama.cpp still samples one token for n_predict 0 (recordings 54 and 56).
  if (llamacpp && max_tokens == 0) max_tokens = 1;
  *out = max_tokens;
  return true;
}

// stream_options, allowed only on a stream: whether it asks for the usage chunk.
bool SimServer::Impl::ParseStreamOptions(evhttp_request* req, const json& so, bool streaming,
                                         bool* include_usage) {
  if (!streaming) {
    ReplyError(req, 400, "'stream_options' is only allowed with 'stream': true");
    return false;
  }
  *include_usage = spec->usage_default_with_stream_options;
  if (so.contains("include_usage")) {
    if (!so["include_usage"].is_boolean()) {
      ReplyError(req, 400, "'stream_options.include_usage' must be a boolean");
      return false;
    }
    *include_usage = so["include_usage"].get<bool>();
  }
  return true;
}

// Whether a prompt of `prompt_tokens` with `*max_tokens` of output fits the context (and, with a
// shared pool, the pool); llama.cpp caps *max_tokens to what is left instead of refusing.
// Answers the error and returns false when it does not fit.
bool SimServer::Impl::FitContext(evhttp_request* req, int64_t prompt_tokens, int64_t* max_tokens) {
  if (spec->dialect == Dialect::kLlamacpp && prompt_tokens >= profile.context_length) {
    // A plain 400 even for a stream (ts/server-context.cpp:3208-3216, :4243-4246; recording 51).
    ReplyJsonError(
        req, 400,
        {{"code", 400},
         {"message", "request (" + std::to_string(prompt_tokens) +
                         " tokens) exceeds the available context size (" +
                         std::to_string(profile.context_length) + " tokens), try increasing it"},
         {"type", "exceed_context_size_error"},
         {"n_prompt_tokens", prompt_tokens},
         {"n_ctx", profile.context_length}});
    return false;
  }
  if (*max_tokens < 0) *max_tokens = profile.context_length - prompt_tokens;
  if (prompt_tokens >= profile.context_length) {
    ReplyError(req, 400,
               "The input (" + std::to_string(prompt_tokens) +
                   " tokens) is longer than the model's context length (" +
                   std::to_string(profile.context_length) + " tokens).");
    return false;
  }
  if (prompt_tokens + *max_tokens > profile.context_length) {
    if (spec->cap_max_tokens_to_context) {
      *max_tokens = profile.context_length - prompt_tokens;
    } else {
      ReplyError(req, 400,
                 "Requested token count exceeds the model's maximum context length of " +
                     std::to_string(profile.context_length) + " tokens. You requested a total of " +
                     std::to_string(prompt_tokens + *max_tokens) +
                     " tokens: " + std::to_string(prompt_tokens) +
                     " tokens from the input messages and " + std::to_string(*max_tokens) +
                     " tokens for the completion. Please reduce the number of tokens in the input "
                     "messages or the completion to fit within the limit.");
      return false;
    }
  }
  const int64_t page = std::max(1, profile.page_size);
  const int64_t need_tokens = (prompt_tokens + *max_tokens + page - 1) / page * page;
  if (profile.cache_model == CacheModel::kRadix && need_tokens > profile.max_total_tokens) {
    ReplyError(req, 400,
               "The request needs " + std::to_string(need_tokens) +
                   " tokens (prompt + max_tokens, in whole pages) but the token pool holds " +
                   std::to_string(profile.max_total_tokens) + ".");
    return false;
  }
  return true;
}

// json_error_200: a JSON error body under HTTP 200, where a stream was asked for.
bool SimServer::Impl::ReplyJsonError200(evhttp_request* req, const RequestFaults& f) {
  if (!f.json_error_200) return false;
  Reply(req, 200,
        ErrorBody(spec->errors, 500,
                  "simulated error under HTTP 200 (capq sim fault json_error_200)"),
        "application/json");
  return true;
}

namespace {

// The output length at which a request stops with "stop", or -1 when it runs to max_tokens: a
// point drawn from the prompt and seed past the profile's eos_min_tokens, or the early_stop fault's
// if that comes first.
int64_t EosAt(const EngineProfile& profile, bool ignore_eos, const RequestFaults& f,
              uint64_t prompt_hash, uint64_t out_seed, int64_t max_tokens) {
  int64_t eos_at = -1;
  if (!ignore_eos && profile.eos_min_tokens < max_tokens) {
    const uint64_t span = static_cast<uint64_t>(max_tokens - profile.eos_min_tokens + 1);
    const int64_t at = profile.eos_min_tokens +
                       static_cast<int64_t>(Mix64(Mix64(prompt_hash, out_seed), 0xe05) % span);
    if (at < max_tokens) eos_at = std::max<int64_t>(1, at);
  }
  if (f.early_stop_after) {
    const int64_t at =
        std::clamp<int64_t>(*f.early_stop_after, 1, std::max<int64_t>(1, max_tokens - 1));
    if (at < max_tokens && (eos_at < 0 || at < eos_at)) eos_at = at;
  }
  return eos_at;
}

}  // namespace

// A validated chat request as a stream: its id, its output text's key and stop point, the engine
// request it submits and the framing of its chunks.
std::unique_ptr<Stream> SimServer::Impl::NewStream(evhttp_request* req, int64_t index,
                                                   const ChatOptions& o, const RequestFaults& f,
                                                   std::vector<uint32_t> ids, int64_t max_tokens) {
  auto s = std::make_unique<Stream>();
  s->impl = this;
  s->req = req;
  s->conn = evhttp_request_get_connection(req);
  s->engine_id = next_engine_id++;
  s->index = index;
  char idbuf[48];
  std::snprintf(idbuf, sizeof(idbuf), "chatcmpl-%016llx%08llx",
                static_cast<unsigned long long>(Mix64(static_cast<uint64_t>(start_unix_ns), 0)),
                static_cast<unsigned long long>(index));
  s->id = idbuf;
  s->streaming = o.streaming;
  s->include_usage = o.include_usage;
  s->prompt_tokens = static_cast<int64_t>(ids.size());
  s->max_tokens = max_tokens;
  s->ignore_eos = o.ignore_eos;
  s->temperature = o.temperature;
  s->faults = f;
  const uint64_t prompt_hash = PromptHash(ids);
  // Temperature 0 is greedy: the seed cannot change the text.
  s->out_seed = o.temperature > 0 ? static_cast<uint64_t>(o.seed) : 0;
  s->out_hash = f.duplicate_of ? PromptHash(ApplyChatTemplate(*f.duplicate_of, tmpl)) : prompt_hash;
  const int64_t eos_at = EosAt(profile, o.ignore_eos, f, prompt_hash, s->out_seed, max_tokens);
  s->pending.id = s->engine_id;
  s->pending.prompt_tokens = std::move(ids);
  s->pending.max_new_tokens = max_tokens;
  s->pending.eos_at_tokens = eos_at;
  // The caches keep the ids of the words this stream sends, so the next turn of a chat, which
  // quotes them as its assistant message, finds them.
  s->pending.output_token = [hash = s->out_hash, seed = s->out_seed](int64_t i) {
    return WordTokenId(OutputWord(hash, seed, i));
  };
  s->eos_at = eos_at;
  s->eos_is_token = spec->llamacpp_stream;
  ChooseVariation(s.get());
  SetChunkHeadAndTail(s.get());
  return s;
}

void SimServer::Impl::HandleChat(evhttp_request* req) {
  const int64_t index = next_index++;
  requests_received.fetch_add(1);
  json body;
  if (!ParseBody(req, &body)) return;
  // Validation, in the order a reader of the error would want to fix things.
  std::string text, error;
  std::vector<ChatMessage> messages;
  if (!MessagesText(body.value("messages", json()), &text, &error, &messages)) {
    ReplyError(req, 400, error);
    return;
  }
  ChatOptions o;
  if (!ParseChatOptions(req, body, &o)) return;

  RequestFaults f = faults.ForRequest(index, text);
  if (f.http_status) {
    ReplyError(
        req, *f.http_status,
        std::string("simulated ") + ReasonPhrase(*f.http_status) + " (capq sim fault http_status)");
    return;
  }

  if (ReplyJsonError200(req, f)) return;
  std::vector<uint32_t> ids = ApplyChatTemplate(messages, tmpl);
  TruncatePrompt(f, &ids);
  const int64_t prompt_tokens = static_cast<int64_t>(ids.size());
  int64_t max_tokens = o.max_tokens;
  if (!FitContext(req, prompt_tokens, &max_tokens)) return;

  std::unique_ptr<Stream> s = NewStream(req, index, o, f, std::move(ids), max_tokens);
  Stream* sp = s.get();
  streams.emplace(sp->engine_id, std::move(s));
  if (sp->conn) WatchConnection(sp);
  if (f.slow_first_byte_ms > 0) {
    DelaySubmit(sp, f.slow_first_byte_ms);
    return;
  }
  SubmitStream(sp);
}

// ---------------------------------------------------------------------------------------------
// SimServer

SimServer::SimServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SimServer::~SimServer() { Stop(); }

namespace {

Status CheckOptions(const ServerOptions& options) {
  if (!(options.time_scale > 0)) {
    return Status::InvalidArgument("time scale must be > 0, got " +
                                   std::to_string(options.time_scale));
  }
  if (options.port < 0 || options.port > 65535) {
    return Status::InvalidArgument("port out of range: " + std::to_string(options.port));
  }
  return Status::Ok();
}

// What the server serves: the engine profile and what follows from it, the fault plan, the truth
// log and the engine itself.
Status LoadRow(const ServerOptions& options, SimServer::Impl* impl) {
  impl->opts = options;
  impl->scale = options.time_scale;
  impl->spec = &SpecFor(options.dialect);
  Result<EngineProfile> profile = engine::LoadProfile(options.profile_path);
  if (!profile.ok()) return profile.status();
  impl->profile = profile.value();
  impl->ChooseFraming();
  impl->digest = engine::ProfileDigest(impl->profile);
  impl->tmpl =
      ChatTemplate{impl->profile.chat_template_tokens, impl->profile.template_prefix_tokens,
                   impl->profile.template_bos, impl->profile.chat_turn_tokens};
  if (impl->profile.cache_model == CacheModel::kSlots) {
    impl->slot_tasks.resize(static_cast<size_t>(impl->profile.max_running_requests));
  }
  impl->model_json = json(impl->profile.served_model_name).dump();
  if (!options.faults_path.empty()) {
    Result<FaultPlan> plan = FaultPlan::Load(options.faults_path);
    if (!plan.ok()) return plan.status();
    impl->faults = std::move(plan.value());
  }
  if (!options.truth_log_path.empty())
    CAPQ_RETURN_IF_ERROR(impl->truth.Open(options.truth_log_path));
  EngineProfile engine_profile = impl->profile;
  // vLLM caches and reports whole KV blocks only (engine/profile.h, cache_block_tokens).
  if (options.dialect == Dialect::kVllm)
    engine_profile.cache_block_tokens = impl->profile.page_size;
  impl->engine = std::make_unique<engine::Engine>(engine_profile);
  return Status::Ok();
}

// A write to a socket the client closed raises SIGPIPE; the server must see EPIPE instead.
void IgnoreSigpipe() {
  struct sigaction old_sa {};
  if (sigaction(SIGPIPE, nullptr, &old_sa) == 0 && old_sa.sa_handler == SIG_DFL) {
    std::signal(SIGPIPE, SIG_IGN);
  }
}

// The loop's event base, the HTTP server on it, the engine timer and the stop event.
Status OpenLoop(SimServer::Impl* impl) {
  // Only the loop thread touches libevent; Stop() wakes it through an eventfd. So libevent needs
  // no locks (evthread_use_pthreads would put a mutex around every buffer write and event change).
  event_config* cfg = event_config_new();
  // Without a precise timer epoll rounds every timeout up to the millisecond: chunks late by ~1 ms.
  event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
  // libevent computes the next wake-up from the time cached when the loop iteration began; after an
  // iteration that wrote hundreds of chunks that time is stale by milliseconds and every step's
  // timer fires that much late. Reading the clock each time costs a vDSO call.
  event_config_set_flag(cfg, EVENT_BASE_FLAG_NO_CACHE_TIME);
  // Every chunk handed to an idle connection enables its write event, and every drained connection
  // disables it again: without the changelist each is an epoll_ctl call on the spot, most of the
  // cost of handing over a chunk. With it the changes are batched (and cancel out) at the next
  // epoll_wait. Its one hazard, file descriptors cloned with dup(), does not arise here.
  event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
  impl->base = event_base_new_with_config(cfg);
  event_config_free(cfg);
  if (!impl->base) return Status::Internal("event_base_new failed");
  impl->http = evhttp_new(impl->base);
  impl->scratch = evbuffer_new();
  impl->engine_timer = evtimer_new(impl->base, OnEngineTimer, impl);
  impl->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl->stop_fd < 0) {
    return Status::Internal(std::string("eventfd failed: ") + std::strerror(errno));
  }
  impl->stop_event = event_new(impl->base, impl->stop_fd, EV_READ, OnStop, impl);
  if (!impl->http || !impl->scratch || !impl->engine_timer || !impl->stop_event ||
      event_add(impl->stop_event, nullptr) != 0) {
    return Status::Internal("libevent allocation failed");
  }
  evhttp_set_gencb(impl->http, OnRequest, impl);
  evhttp_set_timeout(impl->http, kIdleTimeoutS);
  evhttp_set_allowed_methods(impl->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD);
  return Status::Ok();
}

// Binds the listening socket and hands it to the HTTP server; notes the port and accept queue.
Status Listen(const ServerOptions& options, SimServer::Impl* impl) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(options.port));
  if (inet_pton(AF_INET, options.host.c_str(), &addr.sin_addr) != 1) {
    return Status::InvalidArgument("host must be an IPv4 address, got '" + options.host + "'");
  }
  // Thousands of clients connecting at once must not be dropped: a connection refused by a full
  // accept queue retries its SYN a second later, and that second lands in its TTFT. libevent's
  // "-1" means a backlog of 128, so ask for kListenBacklog (the kernel caps it at somaxconn).
  impl->listener = evconnlistener_new_bind(
      impl->base, nullptr, nullptr, LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE, kListenBacklog,
      reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  if (!impl->listener) {
    return Status::Unavailable("cannot listen on " + options.host + ":" +
                               std::to_string(options.port) + ": " + std::strerror(errno));
  }
  evutil_socket_t lfd = evconnlistener_get_fd(impl->listener);
  // Accepted sockets inherit TCP_NODELAY from the listener (Linux). Without it Nagle holds each
  // small SSE frame until the client's delayed ACK (~40 ms), so clients saw chunks in bursts.
  int nodelay = 1;
  setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof(nodelay));
  if (!evhttp_bind_listener(impl->http, impl->listener)) {
    evconnlistener_free(impl->listener);
    impl->listener = nullptr;
    return Status::Internal("evhttp_bind_listener failed");
  }
  sockaddr_in bound{};
  socklen_t len = sizeof(bound);
  if (getsockname(lfd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return Status::Internal(std::string("getsockname failed: ") + std::strerror(errno));
  }
  impl->port = ntohs(bound.sin_port);
  // For a listening socket Linux reports the accept queue's limit in tcpi_sacked.
  tcp_info info{};
  socklen_t info_len = sizeof(info);
  if (getsockopt(lfd, IPPROTO_TCP, TCP_INFO, &info, &info_len) == 0) {
    impl->listen_backlog = static_cast<int>(info.tcpi_sacked);
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<SimServer>> SimServer::Start(const ServerOptions& options) {
  CAPQ_RETURN_IF_ERROR(CheckOptions(options));
  auto impl = std::make_unique<Impl>();
  CAPQ_RETURN_IF_ERROR(LoadRow(options, impl.get()));
  IgnoreSigpipe();
  CAPQ_RETURN_IF_ERROR(OpenLoop(impl.get()));
  CAPQ_RETURN_IF_ERROR(Listen(options, impl.get()));
  impl->t0 = NowNs();
  impl->start_unix_ns = RealtimeAnchor::Take().unix_ns;
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] {
    pthread_setname_np(pthread_self(), "capq-sim-loop");  // names it in top, perf and gdb
    event_base_dispatch(raw->base);
  });
  return std::unique_ptr<SimServer>(new SimServer(std::move(impl)));
}

int SimServer::port() const { return impl_->port; }

std::string SimServer::url() const {
  return "http://" + impl_->opts.host + ":" + std::to_string(impl_->port);
}

const EngineProfile& SimServer::profile() const { return impl_->profile; }

std::string SimServer::identity_digest() const { return impl_->digest; }

EngineStats SimServer::engine_stats() const {
  std::lock_guard<std::mutex> lock(impl_->snap_mu);
  return impl_->snapshot;
}

int64_t SimServer::requests_received() const { return impl_->requests_received.load(); }

int SimServer::listen_backlog() const { return impl_->listen_backlog; }

void SimServer::Stop() {
  if (!impl_) return;
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  if (impl_->stopped.exchange(true)) return;
  if (impl_->thread.joinable()) {
    const uint64_t one = 1;
    if (write(impl_->stop_fd, &one, sizeof(one)) != sizeof(one)) {
      spdlog::error("capq sim: cannot wake the server loop to stop it: {}", std::strerror(errno));
    }
    impl_->thread.join();
  }
  Status s = impl_->truth.Close();
  if (!s.ok()) spdlog::warn("capq sim: {}", s.ToString());
}

}  // namespace capq::sim
