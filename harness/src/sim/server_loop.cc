// The simulated server's loop: one libevent thread owns the engine, every connection and two
// timers.
//
// Virtual time: virtual_ns = (mono_ns - t0) * time_scale. The engine timer is armed at the wall
// instant of engine::Engine::NextEventTime(); when it fires the loop advances the engine to
// max(now, that instant) and hands each event's chunks to their connections right away, so a
// chunk's lateness (truth log) is the timer's wake-up error plus the time spent handing over the
// chunks before it in the same step. The loop writes the connections' buffers to their sockets
// once the step's hand-over is done; finishing replies waits until then too.
// Arrivals first advance the engine to "now" and then submit, so a request never joins a step that
// started before it arrived.
//
// Connection lifetime: evhttp disables reading while a request is being answered, so a client that
// goes away would only be noticed at the next write. A stream may go quiet for a long time (queued,
// prefilling, stalled), so every open stream also watches its socket for EOF with MSG_PEEK and
// frees the connection itself; the connection's close callback cancels the engine request.
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <vector>

#include "server_impl.h"

namespace capq::sim {
namespace {

// A request being answered is never timed out by the server (a day is "never" for a trial).
constexpr int kStreamTimeoutS = 24 * 3600;

void OnConnectionClosed(evhttp_connection*, void* arg) {
  auto* s = static_cast<Stream*>(arg);
  s->impl->ClientGone(s);
}

void OnEofWatch(evutil_socket_t fd, short, void* arg) {
  auto* s = static_cast<Stream*>(arg);
  char c;
  ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    // Frees the connection; its close callback (OnConnectionClosed) cleans the stream up.
    evhttp_connection_free(s->conn);
    return;
  }
  if (r < 0) event_add(s->eof_watch, nullptr);  // spurious wake-up: keep watching
  // r > 0: the client sent more bytes (a pipelined request); stop watching, evhttp reads it later.
}

void OnDelayDone(evutil_socket_t, short, void* arg) {
  auto* s = static_cast<Stream*>(arg);
  SimServer::Impl* impl = s->impl;
  event_free(s->delay_timer);
  s->delay_timer = nullptr;
  --impl->delayed;
  impl->SubmitStream(s);
}

}  // namespace

void OnEngineTimer(evutil_socket_t, short, void* arg) {
  auto* impl = static_cast<SimServer::Impl*>(arg);
  VirtNs target = impl->timer_at ? *impl->timer_at : 0;
  impl->timer_at.reset();
  impl->Pump(std::max(impl->VirtNow(), target));
}

void OnRequest(evhttp_request* req, void* arg) { static_cast<SimServer::Impl*>(arg)->Handle(req); }

void OnStop(evutil_socket_t, short, void* arg) {
  auto* impl = static_cast<SimServer::Impl*>(arg);
  // Cuts every connection; their close callbacks cancel and forget the streams.
  if (impl->http) {
    evhttp_free(impl->http);
    impl->http = nullptr;
    impl->listener = nullptr;  // owned and freed by evhttp
  }
  std::vector<Stream*> left;
  for (auto& [id, s] : impl->streams) left.push_back(s.get());
  for (Stream* s : left) {
    s->conn = nullptr;  // freed with the server
    impl->Forget(s);
  }
  event_base_loopbreak(impl->base);
}

// ---------------------------------------------------------------------------------------------
// Engine driving

void SimServer::Impl::Pump(VirtNs now) {
  if (now < last_v) now = last_v;
  last_v = now;
  for (int pass = 0; pass < 2; ++pass) {
    events.clear();
    if (pass == 1) {
      // llama.cpp sends a request's headers when its slot starts it, so the admissions of the step
      // that starts where the last one ended go out now, after that step's chunks, not with the
      // next step's tokens. (Planning that step is otherwise deferred until the engine is asked.)
      if (!spec->llamacpp_stream) break;
      (void)engine->NextEventTime();
    }
    engine->AdvanceTo(now, &events);
    for (const EngineEvent& e : events) Dispatch(e);
    FlushStaged();
    for (Stream* s : finished) EndReply(s);
    finished.clear();
  }
  if (erase_pending && !Busy()) {
    erase_pending = false;
    DoFlush();
  }
  if (!slots_to_erase.empty()) ErasePendingSlots();
  Rearm();
  Snapshot();
}

void SimServer::Impl::Rearm() {
  std::optional<VirtNs> next = engine->NextEventTime();
  if (!next) {
    if (timer_at) evtimer_del(engine_timer);
    timer_at.reset();
    return;
  }
  if (timer_at && *timer_at == *next) return;
  // libevent measures timeouts from the time it cached when this loop iteration began; refresh it,
  // or the timer fires early by however long this iteration has run.
  event_base_update_cache_time(base);
  int64_t delta_ns = std::max<int64_t>(0, DueMono(*next) - NowNs());
  timeval tv;
  tv.tv_sec = static_cast<time_t>(delta_ns / 1000000000);
  tv.tv_usec = static_cast<suseconds_t>((delta_ns % 1000000000) / 1000);
  evtimer_add(engine_timer, &tv);
  timer_at = *next;
}

void SimServer::Impl::Snapshot() {
  EngineStats st = engine->stats();
  std::lock_guard<std::mutex> lock(snap_mu);
  snapshot = st;
}

void SimServer::Impl::Dispatch(const EngineEvent& e) {
  auto it = streams.find(e.request_id);
  if (it == streams.end()) return;  // cancelled: the client went away
  Stream* s = it->second.get();
  switch (e.kind) {
    case EngineEvent::Kind::kAdmitted:
      s->cached_tokens = e.cached_tokens;
      s->admitted_v = e.t;
      s->slot = e.slot;
      if (s->slot >= 0) OnSlotAdmitted(s);
      // llama.cpp sends the status and headers when a slot starts the task, before its prefill.
      if (s->streaming && spec->llamacpp_stream && !s->stalled) StartReply(s);
      if (s->streaming && !s->stalled && s->first_token_v < 0) {
        if (s->var.keepalive_while_queued && s->headers_sent) SendComment(s);
        if (s->var.role_at_admission) SendRole(s, e.t);
      }
      break;
    case EngineEvent::Kind::kTokens:
      OnTokens(s, e);
      break;
    case EngineEvent::Kind::kFinished:
      s->in_engine = false;
      if (spec->dialect == Dialect::kLlamacpp) OnLlamacppFinished(s, e.t);
      OnFinished(s, e);
      break;
    case EngineEvent::Kind::kRejected:
      s->in_engine = false;
      OnRejected(s, e);
      break;
  }
}

void SimServer::Impl::SubmitStream(Stream* s) {
  VirtNs now = VirtNow();
  // Collect every step that ended before this arrival first (engine::Engine::Submit's contract).
  Pump(now);
  s->arrival_v = last_v;
  s->in_engine = true;
  if (s->streaming && !spec->llamacpp_stream) {
    StartReply(s);
    if (s->var.keepalive_while_queued) SendComment(s);
  }
  engine->Submit(std::move(s->pending), last_v);
  // A rejection (or an admission into the step being formed) is reported at once: collect it.
  Pump(last_v);
}

// ---------------------------------------------------------------------------------------------
// A stream's connection, from its watch to its end

// Keeps the stream's connection open for as long as it streams, and notices when its client goes.
void SimServer::Impl::WatchConnection(Stream* s) {
  // Once evhttp has written anything it reads again to notice a close, with the connection's
  // timeout: a stream may wait in the queue or stall far longer than an idle keep-alive may.
  evhttp_connection_set_timeout(s->conn, kStreamTimeoutS);
  evhttp_connection_set_closecb(s->conn, OnConnectionClosed, s);
  bufferevent* bev = evhttp_connection_get_bufferevent(s->conn);
  // evhttp keeps the day-long value; the socket itself gets no timeout at all while it streams.
  // A write event with a timeout costs a timer-heap insert and removal on every chunk handed to
  // an idle connection. The keep-alive timeout comes back once the reply is written out
  // (IdleOnceWritten).
  if (bev) bufferevent_set_timeouts(bev, nullptr, nullptr);
  evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
  if (fd >= 0) {
    s->eof_watch = event_new(base, fd, EV_READ, OnEofWatch, s);
    event_add(s->eof_watch, nullptr);
  }
}

// slow_first_byte: the stream is submitted once `delay_ms` virtual milliseconds have passed.
void SimServer::Impl::DelaySubmit(Stream* s, double delay_ms) {
  const double wall_s = delay_ms / 1000.0 / scale;
  timeval tv;
  tv.tv_sec = static_cast<time_t>(wall_s);
  tv.tv_usec = static_cast<suseconds_t>((wall_s - static_cast<double>(tv.tv_sec)) * 1e6);
  s->delay_timer = evtimer_new(base, OnDelayDone, s);
  evtimer_add(s->delay_timer, &tv);
  ++delayed;
}

// Drops the stream: cancels its engine request if it still runs and stops watching its connection.
// Whatever happens to the connection afterwards is libevent's business. Destroys `s`.
void SimServer::Impl::Forget(Stream* s) {
  if (staged_stream == s) FlushStaged();
  LogUnwritten(s, 0);  // still queued in libevent: written after the stream is gone
  bool cancelled = false;
  if (s->in_engine) {
    engine->Cancel(s->engine_id, last_v);
    s->in_engine = false;
    cancelled = true;
  }
  if (s->delay_timer) {
    event_free(s->delay_timer);
    s->delay_timer = nullptr;
    --delayed;
  }
  if (s->eof_watch) {
    event_free(s->eof_watch);
    s->eof_watch = nullptr;
  }
  if (s->conn) evhttp_connection_set_closecb(s->conn, nullptr, nullptr);
  streams.erase(s->engine_id);
  if (cancelled) {
    // A cancel at the start of the step in progress re-plans it: its end may have moved.
    Rearm();
    Snapshot();
  }
}

// Closes the connection now, with nothing more written (no terminating chunk, no answer).
void SimServer::Impl::CutNow(Stream* s) {
  evhttp_connection* conn = s->conn;
  Forget(s);
  if (conn) evhttp_connection_free(conn);
}

void SimServer::Impl::ClientGone(Stream* s) {
  // Called from evhttp_connection_free. A failed write first detaches the request from its
  // connection (libevent then leaves it to us to free); otherwise libevent frees it after this.
  evhttp_request* req = s->req;
  const bool detached = req && evhttp_request_get_connection(req) == nullptr;
  s->req = nullptr;
  s->conn = nullptr;
  Forget(s);
  if (detached) evhttp_request_free(req);
}

}  // namespace capq::sim
