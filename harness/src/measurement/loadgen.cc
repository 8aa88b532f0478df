#include "capq/measurement/loadgen.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "capq/log.h"
#include "capq/measurement/decode.h"
#include "capq/measurement/evidence_log.h"
#include "capq/measurement/raw_evidence.h"
#include "ready_queue.h"
#include "receive_stamp.h"
#include "recorder.h"

namespace capq {

const char* PhaseName(Phase p) { return p == Phase::kWarmup ? "warmup" : "measured"; }

std::string HarnessCutAfter(const std::string& id) { return "fail_fast after " + id; }

namespace {

// ---- RAII holders -------------------------------------------------------------------------------

struct EasyDeleter {
  void operator()(CURL* e) const { curl_easy_cleanup(e); }
};
struct MultiDeleter {
  void operator()(CURLM* m) const { curl_multi_cleanup(m); }
};
struct SlistDeleter {
  void operator()(curl_slist* s) const { curl_slist_free_all(s); }
};
struct ShareDeleter {
  void operator()(CURLSH* s) const { curl_share_cleanup(s); }
};
using EasyPtr = std::unique_ptr<CURL, EasyDeleter>;
using MultiPtr = std::unique_ptr<CURLM, MultiDeleter>;
using SlistPtr = std::unique_ptr<curl_slist, SlistDeleter>;
using SharePtr = std::unique_ptr<CURLSH, ShareDeleter>;

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { Reset(); }
  int get() const { return fd_; }

 private:
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd_;
};

Status GlobalInit() {
  static std::once_flag once;
  static CURLcode rc = CURLE_OK;
  std::call_once(once, [] { rc = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (rc != CURLE_OK) {
    return Status::Internal(std::string("curl_global_init failed: ") + curl_easy_strerror(rc));
  }
  return Status::Ok();
}

// ---- One transfer
// ---------------------------------------------------------------------------------

struct Transfer {
  RawRecord* rec = nullptr;
  size_t slot_index = 0;    // index in its phase's request list
  size_t record_index = 0;  // index in LoadResult::records
  size_t shard = 0;         // the connection pool shard it takes its connection from
  EasyPtr easy;
  SseFramer framer;
  std::vector<SseEvent> framed;     // events one read completed, before they go to the recorder
  const MonoNs* wake_ns = nullptr;  // when the socket being read was first seen readable
  internal::ReceiveProbe* probe = nullptr;  // the kernel's stamp of the socket being read
  int fd = -1;  // its connection's socket, as libcurl last asked the loop to watch it
  internal::RecorderBatch* out = nullptr;  // the loop's batch for the recorder
  bool keep_events = true;
  // The arrival model wants the text of its stream (ArrivalModel::Streamed): the events are kept
  // until it ends, and decoded then.
  bool wants_text = false;
  bool text_ok = false;
  std::string text;
  int sse = -1;  // -1 = not decided yet (decided at the first body byte from the headers)
  size_t max_body_bytes = 0;
  char errbuf[CURL_ERROR_SIZE] = {0};

  explicit Transfer(size_t max_event_bytes) : framer(max_event_bytes) {}
};

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    char a = s[i];
    if (a >= 'A' && a <= 'Z') a = static_cast<char>(a - 'A' + 'a');
    if (a != prefix[i]) return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// Every connection asks the kernel for receive stamps (receive_stamp.h); one that refuses still
// connects, its events carry the read's own stamp only.
int SockoptCb(void*, curl_socket_t fd, curlsocktype purpose) {
  if (purpose == CURLSOCKTYPE_IPCXN) (void)internal::EnableReceiveStamps(static_cast<int>(fd));
  return CURL_SOCKOPT_OK;
}

size_t HeaderCb(char* data, size_t size, size_t nitems, void* userp) {
  const MonoNs t = NowNs();
  auto* tr = static_cast<Transfer*>(userp);
  RawRecord* rec = tr->rec;
  const size_t n = size * nitems;
  if (rec->first_byte_ns == 0) rec->first_byte_ns = t;
  rec->last_byte_ns = t;
  std::string_view line = Trim(std::string_view(data, n));
  if (StartsWithNoCase(line, "http/")) {
    // A new response (e.g. after "100 Continue"): only the final one's headers are kept.
    rec->response_headers.clear();
    rec->content_type.clear();
  }
  if (line.empty()) return n;
  if (StartsWithNoCase(line, "content-type:")) {
    rec->content_type = std::string(Trim(line.substr(13)));
  }
  rec->response_headers.emplace_back(line);
  return n;
}

void HandOver(Transfer* tr, MonoNs kernel_ns);

// The kernel's stamp for what this transfer's socket has read, where the loop's probe proves it.
MonoNs KernelStamp(Transfer* tr, MonoNs t) { return tr->probe->Confirm(tr->fd, t); }

size_t WriteCb(char* data, size_t size, size_t nmemb, void* userp) {
  // Timestamp first: everything after this line is bookkeeping, not latency.
  const MonoNs t = NowNs();
  auto* tr = static_cast<Transfer*>(userp);
  RawRecord* rec = tr->rec;
  const size_t n = size * nmemb;
  if (rec->first_body_ns == 0) {
    rec->first_body_ns = t;
    if (rec->first_byte_ns == 0) rec->first_byte_ns = t;
  }
  rec->last_byte_ns = t;
  rec->body_bytes += static_cast<int64_t>(n);
  if (tr->sse < 0) tr->sse = StartsWithNoCase(rec->content_type, "text/event-stream") ? 1 : 0;
  if (tr->sse == 1) {
    tr->framer.Feed(std::string_view(data, n), t, &tr->framed);
    if (!tr->framed.empty()) HandOver(tr, KernelStamp(tr, t));
  } else {
    const size_t room =
        tr->max_body_bytes > rec->body.size() ? tr->max_body_bytes - rec->body.size() : 0;
    const size_t take = std::min(room, n);
    rec->body.append(data, take);
    if (take < n) rec->body_truncated = true;
  }
  return n;
}

// Moves the events a read completed into the recorder's batch, stamped with the loop's wake and
// the kernel's receive stamp.
void HandOver(Transfer* tr, MonoNs kernel_ns) {
  for (SseEvent& ev : tr->framed) {
    ev.wake_ns = std::min(*tr->wake_ns, ev.arrival_ns);
    ev.kernel_ns = kernel_ns;
    tr->out->Event(tr->record_index, ev);
    if (tr->keep_events) tr->rec->events.push_back(std::move(ev));
  }
  tr->framed.clear();
}

// ---- The event loop
// ---------------------------------------------------------------------------------

enum class PhaseEnd { kDone, kInterrupted, kStopped };

class Loop {
 public:
  Loop(const LoadSpec& spec, curl_slist* headers, LoadResult* result)
      : spec_(spec), headers_(headers), result_(result) {}

  Status Init() {
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
    multi_.reset(curl_multi_init());
    if (!multi_) return Status::Internal("curl_multi_init failed");
    curl_multi_setopt(multi_.get(), CURLMOPT_SOCKETFUNCTION, &Loop::SocketCb);
    curl_multi_setopt(multi_.get(), CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(multi_.get(), CURLMOPT_TIMERFUNCTION, &Loop::TimerCb);
    curl_multi_setopt(multi_.get(), CURLMOPT_TIMERDATA, this);
    const long max_c = std::max(spec_.concurrency, spec_.warmup_concurrency);
    // Keep one idle connection per slot so the next request of a slot reuses a warm connection.
    // (libcurl applies the bound to each shard's cache, where it never binds.)
    curl_multi_setopt(multi_.get(), CURLMOPT_MAXCONNECTS, max_c + 4);
    ShardConnections(max_c);
    ReserveDescriptors(max_c + kSpareDescriptors);
    recorder_ = std::make_unique<internal::Recorder>(spec_, result_);
    return Status::Ok();
  }

  // Runs `reqs` (records already allocated at recs[0..]), each released when `arrivals` says.
  PhaseEnd RunPhase(Phase phase, const std::vector<PlannedRequest>& reqs, RawRecord* recs,
                    ArrivalModel& arrivals) {
    phase_ = phase;
    progress_ = LoadProgress{};
    progress_.phase = phase;
    progress_.total = static_cast<int>(reqs.size());
    reqs_ = &reqs;
    recs_ = recs;
    arrivals_ = &arrivals;
    live_.clear();
    live_.resize(reqs.size());
    arrivals.Begin(NowNs(), reqs.size());
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
      Wait(20);
      Drain();
      ReleaseDue();
      CheckStalls();
      recorder_->Post(&pending_);
      TakeCheckerAnswer();
      MaybeProgress(false);
    }
    // A phase is over once its last streams were checked too: a broken last warm-up must stop the
    // run before the measured burst starts.
    FinishChecks();
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
  void ShardConnections(long max_c) {
    const long want = std::min<long>(kMaxShards, (max_c + kConnsPerShard - 1) / kConnsPerShard);
    for (long i = 0; want > 1 && i < want; ++i) {
      SharePtr sh(curl_share_init());
      if (!sh ||
          curl_share_setopt(sh.get(), CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK) {
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
  void ReserveDescriptors(long n) {
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    if (rl.rlim_cur != RLIM_INFINITY) n = std::min<long>(n, static_cast<long>(rl.rlim_cur) - 1);
    const int fd = ::fcntl(epfd_.get(), F_DUPFD_CLOEXEC, static_cast<int>(n));
    if (fd >= 0) ::close(fd);
  }

  // The shard for the next request, counted as taking one of its idle connections if it has any.
  // The idle counts are a guess (a server may close an idle connection): a wrong one costs a new
  // connection in that shard, nothing else.
  size_t PickShard() {
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

  // Waits until the recorder handled everything so far, and takes its checks' answer.
  void FinishChecks() {
    recorder_->Post(&pending_);
    recorder_->WaitIdle();
    TakeCheckerAnswer();
  }

  // Records that ended without the loop (never sent): decoded and written like the rest.
  void RecordUnsent(size_t record_index) { pending_.End(record_index, false); }
  const std::string& evidence_error() const { return recorder_->evidence_error(); }
  int64_t recorder_wait_ns() const { return recorder_->wait_ns(); }

  bool Cancelled() const {
    return spec_.cancel != nullptr && spec_.cancel->load(std::memory_order_relaxed);
  }
  bool Stopped() const { return !stopped_by_.empty(); }
  const std::string& stopped_by() const { return stopped_by_; }
  const std::string& stop_reason() const { return stop_reason_; }
  // What a request the harness cut or never sent after the stop is marked with.
  std::string HarnessCut() const { return HarnessCutAfter(stopped_by_); }

 private:
  static int SocketCb(CURL* easy, curl_socket_t s, int what, void* userp, void*) {
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

  static int TimerCb(CURLM*, long timeout_ms, void* userp) {
    auto* self = static_cast<Loop*>(userp);
    self->timer_deadline_ns_ = timeout_ms < 0 ? -1 : NowNs() + timeout_ms * 1000000;
    return 0;
  }

  // Builds the easy handle for release `r` (not yet sent). Null when curl could not make one;
  // the record then says so and counts as a failed, started request.
  std::unique_ptr<Transfer> Prepare(Release r) {
    const size_t index = r.index;
    RawRecord* rec = &recs_[index];
    rec->intended_send_ns = r.intended_ns;
    // A body built at release lives in its record, which outlives the transfer (libcurl reads
    // POSTFIELDS in place) and carries it into the evidence.
    rec->request_body = std::move(r.body);
    const std::string& body = rec->request_body.empty() ? (*reqs_)[index].body : rec->request_body;
    auto tr = std::make_unique<Transfer>(spec_.max_event_bytes);
    tr->rec = rec;
    tr->slot_index = index;
    tr->record_index = static_cast<size_t>(rec - result_->records.data());
    tr->wake_ns = &wake_ns_;
    tr->probe = &probe_;
    tr->out = &pending_;
    tr->wants_text = arrivals_->WantsText(index);
    tr->keep_events = spec_.keep_events || tr->wants_text;
    tr->max_body_bytes = spec_.max_body_bytes;
    tr->shard = PickShard();
    tr->easy.reset(curl_easy_init());
    if (!tr->easy) {
      rec->actual_send_ns = NowNs();
      rec->end_ns = rec->actual_send_ns;
      rec->transport_error = "curl_easy_init failed";
      rec->cancelled = true;
      pending_.End(tr->record_index, false);
      ++progress_.started;
      ++progress_.completed;
      ++progress_.failed;
      arrivals_->Finished(index, rec->end_ns);
      return nullptr;
    }
    CURL* e = tr->easy.get();
    curl_easy_setopt(e, CURLOPT_URL, spec_.url.c_str());
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers_);
    // One stream per connection, as every OpenAI-compatible client does; HTTP/2 multiplexing would
    // change what the server sees as concurrency.
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
    // Asks for no content coding: a compressor that fills its block before it writes holds events
    // back, and chunk arrival times would measure it. Setting the option also makes libcurl
    // decode a gzip or deflate body that a server sends anyway (RFC 9110 lets one that was sent
    // no Accept-Encoding choose any coding): the events stay readable, and the server's
    // Content-Encoding stays in the record's response headers.
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "identity");
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);  // the API key goes to `url` and nowhere else
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(spec_.request_timeout_s * 1000.0));
    curl_easy_setopt(
        e, CURLOPT_CONNECTTIMEOUT_MS,
        static_cast<long>(std::min(spec_.connect_timeout_s, spec_.request_timeout_s) * 1000.0));
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, spec_.insecure_tls ? 0L : 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, spec_.insecure_tls ? 0L : 2L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    // 4 KiB reads, not curl's 16 KiB: one chunk is a few hundred bytes, and at 4,096 streams the
    // difference is 48 MB of buffers. A larger burst is read in more calls, each stamped.
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 4096L);
    curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, &SockoptCb);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &WriteCb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, tr.get());
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &HeaderCb);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, tr.get());
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, tr->errbuf);
    curl_easy_setopt(e, CURLOPT_PRIVATE, tr.get());
    if (!shares_.empty()) curl_easy_setopt(e, CURLOPT_SHARE, shares_[tr->shard].get());
    return tr;
  }

  // Hands a prepared transfer to curl; curl writes the request on the next loop turn.
  void Launch(std::unique_ptr<Transfer> tr) {
    RawRecord* rec = tr->rec;
    rec->actual_send_ns = NowNs();
    const CURLMcode mc = curl_multi_add_handle(multi_.get(), tr->easy.get());
    ++progress_.started;
    if (mc != CURLM_OK) {
      rec->end_ns = NowNs();
      rec->transport_error = std::string("curl_multi_add_handle: ") + curl_multi_strerror(mc);
      rec->cancelled = true;
      pending_.End(tr->record_index, false);
      ++progress_.completed;
      ++progress_.failed;
      arrivals_->Finished(tr->slot_index, rec->end_ns);
      return;
    }
    pending_.Sent(tr->record_index);
    ++active_;
    ++progress_.in_flight;
    live_[tr->slot_index] = std::move(tr);
  }

  // Sends every request the arrival model says is due. Their handles are built first, so that a
  // burst's sends (C at a closed loop's start) follow each other back to back. A request whose
  // handle could not be built ended at once, which may release the next one.
  void ReleaseDue() {
    while (!stopping_) {
      const MonoNs now = NowNs();
      std::vector<std::unique_ptr<Transfer>> due;
      int taken = 0, sending = 0;
      for (auto r = arrivals_->Peek();
           r && r->intended_ns <= now && active_ + sending < InFlightCap(); r = arrivals_->Peek()) {
        Release release = arrivals_->Take();
        ++taken;
        if (!release.not_sent.empty()) {
          RecordNotSent(release);
          continue;
        }
        ++sending;
        if (auto tr = Prepare(std::move(release))) due.push_back(std::move(tr));
      }
      if (taken == 0) break;
      for (auto& tr : due) Launch(std::move(tr));
    }
    ArmReleaseTimer();
  }

  // A release the arrival model will never send (its session ended): a record never sent, with
  // the model's reason, ended now.
  void RecordNotSent(const Release& r) {
    RawRecord* rec = &recs_[r.index];
    rec->intended_send_ns = r.intended_ns;
    rec->cancelled = true;
    rec->cancelled_by_harness = r.not_sent;
    rec->transport_error = "not sent: " + r.not_sent;
    pending_.End(static_cast<size_t>(rec - result_->records.data()), false);
    ++progress_.completed;
    ++progress_.failed;
  }

  bool ReleaseIsDue() const {
    if (stopping_ || AtInFlightCap()) return false;
    const auto r = arrivals_->Peek();
    return r && r->intended_ns <= NowNs();
  }

  int InFlightCap() const {
    return spec_.max_in_flight > 0 ? spec_.max_in_flight : std::numeric_limits<int>::max();
  }
  bool AtInFlightCap() const { return active_ >= InFlightCap(); }

  // Wakes the loop's epoll_wait when the next release is due, to the nanosecond (a timerfd, not
  // epoll's millisecond timeout). Disarmed while nothing is scheduled or the in-flight cap holds
  // the releases back (a completion then releases them).
  void ArmReleaseTimer() {
    const auto r = stopping_ || AtInFlightCap() ? std::nullopt : arrivals_->Peek();
    const MonoNs at = r ? std::max<MonoNs>(r->intended_ns, 1) : 0;
    if (at == release_timer_ns_) return;
    release_timer_ns_ = at;
    itimerspec its{};
    its.it_value.tv_sec = static_cast<time_t>(at / 1000000000);
    its.it_value.tv_nsec = static_cast<long>(at % 1000000000);
    timerfd_settime(release_timer_.get(), TFD_TIMER_ABSTIME, &its, nullptr);
  }

  // Waits up to max_wait_ms (the loop wakes at least that often to see the cancel flag and report
  // progress) and lets curl act on every ready socket and expired timer.
  void Wait(long max_wait_ms) {
    const MonoNs now = NowNs();
    long wait_ms = ready_.empty() ? max_wait_ms : 0;
    if (timer_deadline_ns_ >= 0) {
      const MonoNs left = timer_deadline_ns_ - now;
      wait_ms =
          left <= 0 ? 0 : std::min<long>(wait_ms, static_cast<long>((left + 999999) / 1000000));
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
      if (pending_.size() >= internal::Recorder::kMaxBacklogBytes / 4) recorder_->Post(&pending_);
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

  void Drain() {
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

  void Complete(Transfer* tr, CURLcode rc, MonoNs done_ns) {
    RawRecord* rec = tr->rec;
    rec->end_ns = done_ns;
    long code = 0;
    curl_easy_getinfo(tr->easy.get(), CURLINFO_RESPONSE_CODE, &code);
    rec->http_status = code;
    long connects = 0;
    curl_easy_getinfo(tr->easy.get(), CURLINFO_NUM_CONNECTS, &connects);
    rec->reused_connection = connects == 0;
    FinishFraming(tr, done_ns);
    if (rc != CURLE_OK) {
      rec->transport_error =
          tr->errbuf[0] != '\0' ? std::string(tr->errbuf) : curl_easy_strerror(rc);
      rec->cancelled = true;
      if (rc == CURLE_OPERATION_TIMEDOUT) rec->timed_out = true;
    }
    if (rc != CURLE_OK || code != 200) ++progress_.failed;
    if (tr->wants_text) TakeText(tr, rc == CURLE_OK && code == 200);
    // The record is whole: the recorder decodes, writes and checks it (fail fast).
    pending_.End(tr->record_index, !Stopped());
  }

  // The text the arrival model asked for, decoded here on the loop's thread: once per such
  // request, at its end, over a stream a turn long (small), while the recorder decodes the same
  // events for the results. The events go again unless the records keep them; both happen before
  // the record's end is posted, after which the recorder reads it.
  void TakeText(Transfer* tr, bool answered) {
    RawRecord* rec = tr->rec;
    RequestResult d = DecodeRecord(*rec);
    tr->text_ok = answered && !rec->cancelled && !rec->timed_out && !rec->stalled &&
                  d.errors.empty() && !d.finish_reason.empty();
    tr->text = std::move(d.content_text);
    if (!spec_.keep_events) std::vector<SseEvent>().swap(rec->events);
  }

  // The end of a transfer's stream: an event left open is emitted, the framer's counts kept.
  void FinishFraming(Transfer* tr, MonoNs t) {
    RawRecord* rec = tr->rec;
    tr->framer.Finish(t, &tr->framed);
    HandOver(tr, 0);  // an event left open ends with the transfer: no read of its own
    rec->sse_comments = tr->framer.comments();
    rec->sse_overflow = tr->framer.overflowed();
    rec->sse_unterminated = tr->framer.unterminated_events();
  }

  void TakeCheckerAnswer() {
    if (Stopped()) return;
    if (auto answer = recorder_->Answer()) Stop(answer->first, std::move(answer->second));
  }

  // The arrival model holds requests back that nothing can release any more: the run stops at the
  // first of them, named, rather than waiting forever or ending the phase as if it were whole.
  void StopDry() {
    size_t i = 0;
    while (i + 1 < reqs_->size() && (recs_[i].actual_send_ns != 0 || recs_[i].cancelled)) ++i;
    Stop((*reqs_)[i].id, std::string("the ") + arrivals_->name() +
                             " arrival model released nothing more while nothing was in flight");
  }

  void Stop(const std::string& id, std::string why) {
    stopped_by_ = id;
    stop_reason_ = std::move(why);
    stopping_ = true;
  }

  // The stall bound: a live stream silent for longer than spec_.stall_timeout_s since its last
  // byte is cut as the server's failure, and stops the run. Only once its body began: before
  // that the wait is its TTFT (queued, prefilling), which the request timeout bounds.
  void CheckStalls() {
    if (Stopped() || !(spec_.stall_timeout_s > 0)) return;
    const MonoNs now = NowNs();
    const MonoNs bound = static_cast<MonoNs>(spec_.stall_timeout_s * 1e9);
    for (auto& tr : live_) {
      if (!tr) continue;
      RawRecord* rec = tr->rec;
      if (rec->first_body_ns == 0) continue;
      const MonoNs last = rec->last_byte_ns;
      if (now - last <= bound) continue;
      char why[160];
      std::snprintf(why, sizeof why, "stalled: no byte for %.2f wall seconds (the bound is %g)",
                    NsToS(now - last), spec_.stall_timeout_s);
      Cut(tr, now, why, "");
      rec->stalled = true;
      Stop(rec->id, why);
      return;
    }
  }

  // Cuts one in-flight transfer, keeping what it received.
  void Cut(std::unique_ptr<Transfer>& tr, MonoNs now, const std::string& transport_error,
           const std::string& by_harness) {
    curl_multi_remove_handle(multi_.get(), tr->easy.get());
    RawRecord* rec = tr->rec;
    rec->end_ns = now;
    long code = 0;
    curl_easy_getinfo(tr->easy.get(), CURLINFO_RESPONSE_CODE, &code);
    rec->http_status = code;
    FinishFraming(tr.get(), now);
    rec->cancelled = true;
    rec->transport_error = transport_error;
    rec->cancelled_by_harness = by_harness;
    if (tr->wants_text && !spec_.keep_events) std::vector<SseEvent>().swap(rec->events);
    pending_.End(tr->record_index, false);
    tr.reset();
    --active_;
    --progress_.in_flight;
    ++progress_.completed;
    ++progress_.failed;
  }

  // Cuts every in-flight transfer. Records never started stay with actual_send_ns == 0 and are
  // marked by RunLoad().
  void CancelAll(const std::string& transport_error, const std::string& by_harness) {
    for (auto& tr : live_) {
      if (tr) Cut(tr, NowNs(), transport_error, by_harness);
    }
    MaybeProgress(true);
  }

  void MaybeProgress(bool force) {
    if (!spec_.on_progress) return;
    const MonoNs now = NowNs();
    if (!force && now - last_progress_ns_ < 250000000) return;
    last_progress_ns_ = now;
    progress_.now_ns = now;
    spec_.on_progress(progress_);
  }

  const LoadSpec& spec_;
  curl_slist* headers_;
  LoadResult* result_;
  static constexpr int kPeekEvery = 16;            // socket actions between two readiness glances
  static constexpr int kMaxActionsPerWait = 1024;  // then completions, stalls, progress get a turn
  static constexpr long kConnsPerShard = 64;       // connections libcurl walks per request
  static constexpr long kMaxShards = 256;
  // Descriptors beyond one per connection: the epoll and timer fds, the evidence file, the
  // caller's own.
  static constexpr long kSpareDescriptors = 64;
  static constexpr size_t kNoShard = std::numeric_limits<size_t>::max();
  internal::ReadyQueue ready_;
  MonoNs wake_ns_ = 0;               // when the socket being handled was first seen readable
  internal::ReceiveProbe probe_;     // the kernel's stamp of that socket's queued bytes
  internal::RecorderBatch pending_;  // what happened since the last hand-over
  Fd epfd_;
  // Connection pool shards (ShardConnections); empty = the multi handle's own cache. Destroyed
  // after the multi handle and every easy handle (~Loop()).
  std::vector<SharePtr> shares_;
  std::vector<int> idle_;          // per shard: connections believed idle in its cache
  size_t freed_shard_ = kNoShard;  // the shard of the transfer whose completion is being handled
  size_t next_shard_ = 0;
  MultiPtr multi_;
  MonoNs timer_deadline_ns_ = -1;
  Phase phase_ = Phase::kWarmup;
  const std::vector<PlannedRequest>* reqs_ = nullptr;
  RawRecord* recs_ = nullptr;
  ArrivalModel* arrivals_ = nullptr;  // the current phase's
  Fd release_timer_;                  // fires when arrivals_'s next release is due
  MonoNs release_timer_ns_ = 0;       // what it is armed for; 0 = disarmed
  int active_ = 0;
  bool stopping_ = false;  // cancelled or stopped: completions no longer start requests
  std::string stopped_by_, stop_reason_;  // fail fast: the request that stopped the run, and why
  LoadProgress progress_;
  MonoNs last_progress_ns_ = 0;
  std::unique_ptr<internal::Recorder> recorder_;
  // Transfers of the current phase by request index; null once done. Declared after multi_ so
  // they are destroyed first, and ~Loop() removes any still attached.
  std::vector<std::unique_ptr<Transfer>> live_;

 public:
  ~Loop() {
    for (auto& tr : live_) {
      if (tr) curl_multi_remove_handle(multi_.get(), tr->easy.get());
    }
    // A share handle is freed only once no easy handle uses it; its cache closes its connections.
    live_.clear();
    multi_.reset();
    shares_.clear();
  }
};

}  // namespace

Result<LoadResult> RunLoad(const LoadSpec& spec) {
  if (spec.url.empty()) return Status::InvalidArgument("load: empty URL");
  if (!StartsWithNoCase(spec.url, "http://") && !StartsWithNoCase(spec.url, "https://")) {
    return Status::InvalidArgument("load: URL must start with http:// or https://: " + spec.url);
  }
  if (spec.concurrency < 1) return Status::InvalidArgument("load: concurrency must be >= 1");
  if (!spec.warmup.empty() && spec.warmup_concurrency < 1) {
    return Status::InvalidArgument("load: warm-up concurrency must be >= 1");
  }
  if (!(spec.request_timeout_s > 0))
    return Status::InvalidArgument("load: request timeout must be > 0");
  CAPQ_RETURN_IF_ERROR(GlobalInit());

  // Headers shared by every request; the slist outlives every easy handle (declared first).
  curl_slist* raw = nullptr;
  raw = curl_slist_append(raw, "Content-Type: application/json");
  SlistPtr headers(raw);
  if (raw == nullptr) return Status::Internal("curl_slist_append failed");
  const char* extra[] = {"Accept: text/event-stream",
                         // curl would otherwise wait up to 1 s for "100 Continue" on large prompts.
                         "Expect:"};
  for (const char* h : extra) {
    curl_slist* next = curl_slist_append(headers.get(), h);
    if (next == nullptr) return Status::Internal("curl_slist_append failed");
  }
  if (!spec.api_key.empty()) {
    std::string auth = "Authorization: Bearer " + spec.api_key;
    curl_slist* next = curl_slist_append(headers.get(), auth.c_str());
    std::fill(auth.begin(), auth.end(), '\0');
    if (next == nullptr) return Status::Internal("curl_slist_append failed");
  }

  LoadResult result;
  result.records.resize(spec.warmup.size() + spec.measured.size());
  for (size_t i = 0; i < spec.warmup.size(); ++i) {
    RawRecord& r = result.records[i];
    r.id = spec.warmup[i].id;
    r.phase = Phase::kWarmup;
    r.index = spec.warmup[i].index;
  }
  for (size_t i = 0; i < spec.measured.size(); ++i) {
    RawRecord& r = result.records[spec.warmup.size() + i];
    r.id = spec.measured[i].id;
    r.phase = Phase::kMeasured;
    r.index = spec.measured[i].index;
  }

  Loop loop(spec, headers.get(), &result);
  CAPQ_RETURN_IF_ERROR(loop.Init());
  result.anchor = RealtimeAnchor::Take();
  result.start_ns = NowNs();
  spdlog::debug("load: {} warm-up at C={}, {} measured at C={} to {}", spec.warmup.size(),
                spec.warmup_concurrency, spec.measured.size(), spec.concurrency, spec.url);
  PhaseEnd end = loop.Cancelled() ? PhaseEnd::kInterrupted : PhaseEnd::kDone;
  if (end == PhaseEnd::kDone && !spec.warmup.empty()) {
    auto arrivals = ClosedLoopArrivals(spec.warmup_concurrency);
    end = loop.RunPhase(Phase::kWarmup, spec.warmup, result.records.data(), *arrivals);
  }
  if (end == PhaseEnd::kDone && loop.Cancelled()) end = PhaseEnd::kInterrupted;
  if (end == PhaseEnd::kDone) {
    result.measured_start_ns = NowNs();
    if (spec.warmup.empty()) result.start_ns = result.measured_start_ns;
    auto arrivals =
        spec.measured_arrivals ? spec.measured_arrivals() : ClosedLoopArrivals(spec.concurrency);
    end = loop.RunPhase(Phase::kMeasured, spec.measured, result.records.data() + spec.warmup.size(),
                        *arrivals);
  }
  // An interrupt returns without waiting for the checker; its records must be read by nobody else
  // before they are handed back.
  loop.FinishChecks();
  result.end_ns = NowNs();
  result.interrupted = end == PhaseEnd::kInterrupted;
  if (end == PhaseEnd::kStopped) {
    result.stopped_by = loop.stopped_by();
    result.stop_reason = loop.stop_reason();
  }
  for (size_t i = 0; i < result.records.size(); ++i) {
    RawRecord& r = result.records[i];
    // Sent, or ended unsent by its arrival model already (cancelled with no send time).
    if (r.actual_send_ns != 0 || r.cancelled || end == PhaseEnd::kDone) continue;
    r.cancelled = true;
    if (end == PhaseEnd::kStopped) {
      r.cancelled_by_harness = loop.HarnessCut();
      r.transport_error = "not sent: " + r.cancelled_by_harness;
    } else {
      r.transport_error = "not sent: run interrupted";
    }
    loop.RecordUnsent(i);
  }
  loop.FinishChecks();
  result.evidence_error = loop.evidence_error();
  result.recorder_wait_ns = loop.recorder_wait_ns();
  return result;
}

}  // namespace capq
