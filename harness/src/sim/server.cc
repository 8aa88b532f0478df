// The simulated server: SimServer's start-up, its accessors and its stop. Elsewhere: the loop in
// server_loop.cc, the routes in server_routes.cc (the chat endpoint in server_chat.cc, its request
// read in chat_request.cc), the HTTP answers they share in server_http.cc, the streaming of a chat
// reply in server_stream.cc and how its frames reach the socket in server_write.cc.
#include "capq/sim/server.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "capq/clock.h"
#include "capq/log.h"
#include "capq/sim/dialect.h"
#include "capq/sim/faults.h"
#include "capq/sim/tokenizer.h"
#include "capq/sim/truth_log.h"
#include "server_impl.h"

namespace capq::sim {
namespace {

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
  if (!(options.idle_timeout_s > 0)) {
    return Status::InvalidArgument("idle timeout must be > 0 s, got " +
                                   std::to_string(options.idle_timeout_s));
  }
  return Status::Ok();
}

// What the server serves: the engine profile and what follows from it, the fault plan, the truth
// log and the engine itself.
Status LoadRow(const ServerOptions& options, SimServer::Impl* impl) {
  impl->opts = options;
  impl->scale = options.time_scale;
  const auto idle_us = static_cast<int64_t>(options.idle_timeout_s * 1e6);
  impl->idle_timeout.tv_sec = static_cast<time_t>(idle_us / 1000000);
  impl->idle_timeout.tv_usec = static_cast<suseconds_t>(idle_us % 1000000);
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
  // No server-wide timeout: evhttp would time a new connection's wait for its first request with
  // it. Uvicorn arms its keep-alive timer only once a response is complete, so a client that
  // connects long before it sends (thousands of connections opened at once) or a loop busy for
  // longer than the timeout before it reads a request already sent never costs the request. The
  // timeout is armed once a reply is written out (IdleOnceWritten).
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
