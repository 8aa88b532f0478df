// The load generator's event loop (loadgen_internal.h): one thread, epoll over libcurl's sockets
// and a timerfd for the arrival model's releases, libcurl's multi handle driven socket by socket,
// and the connection pool kept in shards.
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "loadgen_internal.h"

namespace capq::internal::loadgen {

Status Loop::Init() {
  epfd_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
  if (epfd_.get() < 0) return Status::Internal(std::string("epoll_create1: ") + strerror(errno));
  release_timer_ = Fd(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  if (release_timer_.get() < 0) {
    return Status::Internal(std::string("timerfd_create: ") + strerror(errno));
  }
  // Edge-triggered, never read: each expiry wakes the loop once. fd -1 keeps it out of the
  // ready queue (only curl's sockets go there).
  epoll_event tev{};
  tev.events = EPOLLIN | EPOLLET;
  tev.data.fd = -1;
  if (::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, release_timer_.get(), &tev) != 0) {
    return Status::Internal(std::string("epoll_ctl(timerfd): ") + strerror(errno));
  }
  // The same for the board's wake-up: each write wakes the loop once.
  wake_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (wake_.get() < 0 || ::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, wake_.get(), &tev) != 0) {
    return Status::Internal(std::string("eventfd: ") + strerror(errno));
  }
  board_->SetWake(index_, wake_.get());
  multi_.reset(curl_multi_init());
  if (!multi_) return Status::Internal("curl_multi_init failed");
  curl_multi_setopt(multi_.get(), CURLMOPT_SOCKETFUNCTION, &Loop::SocketCb);
  curl_multi_setopt(multi_.get(), CURLMOPT_SOCKETDATA, this);
  curl_multi_setopt(multi_.get(), CURLMOPT_TIMERFUNCTION, &Loop::TimerCb);
  curl_multi_setopt(multi_.get(), CURLMOPT_TIMERDATA, this);
  const long all_c = std::max(spec_.connections > 0 ? spec_.connections : spec_.concurrency,
                              spec_.warmup_concurrency);
  // This loop's share of the connections; the descriptors are the process's, for all loops.
  const long loops = board_->loops();
  const long max_c = (all_c + loops - 1) / loops;
  // Keep one idle connection per slot so the next request of a slot reuses a warm connection.
  // (libcurl applies the bound to each shard's cache, where it never binds.)
  curl_multi_setopt(multi_.get(), CURLMOPT_MAXCONNECTS, max_c + 4);
  ShardConnections(max_c);
  ReserveDescriptors(all_c + loops * kSpareDescriptors);
  recorder_ = std::make_unique<Recorder>(spec_, result_, board_, index_);
  return Status::Ok();
}

Loop::~Loop() {
  for (auto& tr : live_) {
    if (tr) curl_multi_remove_handle(multi_.get(), tr->easy.get());
  }
  // A share handle is freed only once no easy handle uses it; its cache closes its connections.
  live_.clear();
  multi_.reset();
  shares_.clear();
}

PhaseEnd Loop::RunPhase(Phase phase, const std::vector<PlannedRequest>& reqs, RawRecord* recs,
                        ArrivalModel& arrivals, MonoNs start_ns) {
  phase_ = phase;
  progress_ = LoadProgress{};
  progress_.phase = phase;
  for (size_t i = 0; i < reqs.size(); ++i) progress_.total += arrivals.Releases(i) ? 1 : 0;
  reqs_ = &reqs;
  recs_ = recs;
  arrivals_ = &arrivals;
  live_.clear();
  live_.resize(reqs.size());
  arrivals.Begin(start_ns, reqs.size());
  ReleaseDue();
  while (active_ > 0 || !arrivals.Exhausted()) {
    if (Cancelled()) {
      // Keep what already reached our sockets, start nothing new, then cut the rest.
      stopping_ = true;
      Wait(0);
      Drain();
      CancelAll("cancelled: run interrupted", "");
      return PhaseEnd::kInterrupted;
    }
    if (Stopped()) {
      CancelAll("cancelled by the harness: " + HarnessCut(), HarnessCut());
      return PhaseEnd::kStopped;
    }
    if (active_ == 0 && !arrivals.Peek()) {
      StopDry();
      continue;
    }
    // A silent loop still wakes for the decision's tick: the requests all waiting for their
    // first tokens are the ones whose waits decide.
    Wait(DecisionTicks() ? kDecisionTickNs / 1'000'000 : 20);
    Drain();
    ReleaseDue();
    CheckStalls();
    TickDecision();
    recorder_->Post(&pending_);
    TakeCheckerAnswer();
    MaybeProgress(false);
  }
  // A phase is over once its last streams were checked too: a broken last warm-up must stop the
  // run before the measured burst starts.
  FinishChecks();
  // Every read of this loop's measured share was handed to the rule: the early decision no
  // longer waits for its ticks.
  if (phase == Phase::kMeasured) board_->Done(index_);
  MaybeProgress(true);
  return Stopped() ? PhaseEnd::kStopped : PhaseEnd::kDone;
}

// libcurl (7.88, Debian 12's) walks every connection in a transfer's cache twice per request:
// to find one to reuse when it starts (each in-use one is looked at before it is skipped), and
// to close connect-only ones when its handle is removed. With thousands of streams open that is
// most of the loop's time, and an open loop falls behind its schedule. So the connections are
// kept in shards of about kConnsPerShard, each its own cache (a share handle that shares
// connections), and a request goes to the shard that just freed a connection (a closed loop's
// slot keeps its connection), else to the one with the most idle connections, else in turn.
// Up to kConnsPerShard streams there is one cache, the multi handle's own, as without shards.
void Loop::ShardConnections(long max_c) {
  const long want = std::min<long>(kMaxShards, (max_c + kConnsPerShard - 1) / kConnsPerShard);
  for (long i = 0; want > 1 && i < want; ++i) {
    SharePtr sh(curl_share_init());
    if (!sh || curl_share_setopt(sh.get(), CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK) {
      shares_.clear();  // one cache, slower at thousands of streams but the same behaviour
      break;
    }
    shares_.push_back(std::move(sh));
  }
  idle_.assign(std::max<size_t>(shares_.size(), 1), 0);
}

// The kernel grows a process's descriptor table by doubling it, and in a process with more than
// one thread each growth waits for an RCU grace period (expand_fdtable): 8-16 ms on this
// machine, during which the loop sends and reads nothing; at 1,000 requests/s that stall hit
// the 256th, 512th, 1,024th ... connection. One growth to the size the run needs, before its
// first send, costs one such wait instead; the table never shrinks, so a later run finds it.
// F_DUPFD takes the lowest free number from `n` on, so no descriptor in use is touched.
void Loop::ReserveDescriptors(long n) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_cur != RLIM_INFINITY) n = std::min<long>(n, static_cast<long>(rl.rlim_cur) - 1);
  const int fd = ::fcntl(epfd_.get(), F_DUPFD_CLOEXEC, static_cast<int>(n));
  if (fd >= 0) ::close(fd);
}

// The shard for the next request, counted as taking one of its idle connections if it has any.
// The idle counts are a guess (a server may close an idle connection): a wrong one costs a new
// connection in that shard, nothing else.
size_t Loop::PickShard() {
  const size_t n = idle_.size();
  if (n == 1) return 0;
  size_t best = freed_shard_;
  if (best >= n || idle_[best] == 0) {
    best = next_shard_;
    next_shard_ = (next_shard_ + 1) % n;
    for (size_t s = 0; s < n; ++s) {
      if (idle_[s] > idle_[best]) best = s;
    }
  }
  if (idle_[best] > 0) --idle_[best];
  return best;
}

void Loop::FinishChecks() {
  recorder_->Post(&pending_);
  recorder_->WaitIdle();
  TakeCheckerAnswer();
}

int Loop::SocketCb(CURL* easy, curl_socket_t s, int what, void* userp, void*) {
  auto* self = static_cast<Loop*>(userp);
  // libcurl names the transfer that watches the socket (a reused connection's next transfer
  // too: the socket left the multi handle's watch when the last one ended).
  Transfer* tr = nullptr;
  curl_easy_getinfo(easy, CURLINFO_PRIVATE, reinterpret_cast<char**>(&tr));
  if (tr != nullptr) tr->fd = what == CURL_POLL_REMOVE ? -1 : static_cast<int>(s);
  if (what == CURL_POLL_REMOVE) {
    epoll_ctl(self->epfd_.get(), EPOLL_CTL_DEL, s, nullptr);
    return 0;
  }
  epoll_event ev{};
  ev.data.fd = s;
  if (what & CURL_POLL_IN) ev.events |= EPOLLIN;
  if (what & CURL_POLL_OUT) ev.events |= EPOLLOUT;
  if (epoll_ctl(self->epfd_.get(), EPOLL_CTL_MOD, s, &ev) != 0) {
    if (errno != ENOENT || epoll_ctl(self->epfd_.get(), EPOLL_CTL_ADD, s, &ev) != 0) {
      return -1;
    }
  }
  return 0;
}

int Loop::TimerCb(CURLM*, long timeout_ms, void* userp) {
  auto* self = static_cast<Loop*>(userp);
  self->timer_deadline_ns_ = timeout_ms < 0 ? -1 : NowNs() + timeout_ms * 1000000;
  return 0;
}

// Waits up to max_wait_ms (the loop wakes at least that often to see the cancel flag and report
// progress) and lets curl act on every ready socket and expired timer.
void Loop::Wait(long max_wait_ms) {
  const MonoNs now = NowNs();
  long wait_ms = ready_.empty() ? max_wait_ms : 0;
  if (timer_deadline_ns_ >= 0) {
    const MonoNs left = timer_deadline_ns_ - now;
    wait_ms = left <= 0 ? 0 : std::min<long>(wait_ms, static_cast<long>((left + 999999) / 1000000));
  }
  epoll_event evs[256];
  int n = epoll_wait(epfd_.get(), evs, 256, static_cast<int>(wait_ms));
  ready_.Take(evs, n, NowNs());
  int running = 0, fd = -1, flags = 0;
  MonoNs since = 0;
  for (int handled = 1; handled <= kMaxActionsPerWait && ready_.Pop(&fd, &flags, &since);
       ++handled) {
    wake_ns_ = since;  // the first moment this socket was seen readable
    if (flags & CURL_CSELECT_IN) probe_.Peek(fd);
    curl_multi_socket_action(multi_.get(), fd, flags, &running);
    probe_.Clear();
    // One socket's action may read megabytes when the streams ran ahead of us: hand them over
    // as they come, so the loop's batch stays small whatever is queued in the kernel.
    if (pending_.size() >= Recorder::kMaxBacklogBytes / 4) recorder_->Post(&pending_);
    // A glance at the sockets that became readable meanwhile: they are stamped now and served
    // in turn, so a stamp waits for at most kPeekEvery actions, not for the whole batch.
    if (handled % kPeekEvery == 0) {
      n = epoll_wait(epfd_.get(), evs, 256, 0);
      ready_.Take(evs, n, NowNs());
      // A scheduled send does not wait for the rest of the batch either.
      if (ReleaseIsDue()) ReleaseDue();
    }
  }
  if (timer_deadline_ns_ >= 0 && NowNs() >= timer_deadline_ns_) {
    timer_deadline_ns_ = -1;
    wake_ns_ = NowNs();
    curl_multi_socket_action(multi_.get(), CURL_SOCKET_TIMEOUT, 0, &running);
  }
}

// Takes every finished transfer from libcurl: its record completed, its slot freed, and the
// arrival model told, which may release the next request at once.
void Loop::Drain() {
  int queued = 0;
  while (CURLMsg* m = curl_multi_info_read(multi_.get(), &queued)) {
    if (m->msg != CURLMSG_DONE) continue;
    const MonoNs done_ns = NowNs();
    CURL* e = m->easy_handle;
    const CURLcode rc = m->data.result;
    Transfer* raw = nullptr;
    curl_easy_getinfo(e, CURLINFO_PRIVATE, reinterpret_cast<char**>(&raw));
    if (raw == nullptr) continue;
    const size_t index = raw->slot_index;
    std::unique_ptr<Transfer> tr = std::move(live_[index]);
    Complete(tr.get(), rc, done_ns);
    const bool wants_text = tr->wants_text, text_ok = tr->text_ok;
    std::string text = std::move(tr->text);
    curl_multi_remove_handle(multi_.get(), e);
    // Its connection went back to its shard's cache (a guess when the transfer failed).
    if (rc == CURLE_OK) ++idle_[tr->shard];
    freed_shard_ = tr->shard;
    tr.reset();
    --active_;
    --progress_.in_flight;
    ++progress_.completed;
    if (wants_text) arrivals_->Streamed(index, text_ok, std::move(text));
    arrivals_->Finished(index, done_ns);
    ReleaseDue();
    freed_shard_ = kNoShard;
  }
}

// Each loop puts its own progress on the board; the first (the caller's thread) reports the sum.
void Loop::MaybeProgress(bool force) {
  if (!spec_.on_progress) return;
  const MonoNs now = NowNs();
  if (!force && now - last_progress_ns_ < 250000000) return;
  last_progress_ns_ = now;
  progress_.now_ns = now;
  board_->Publish(index_, progress_);
  if (index_ == 0) spec_.on_progress(board_->Sum());
}

}  // namespace capq::internal::loadgen
