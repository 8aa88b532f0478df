// The load generator's insides (loadgen.h), shared by its files:
//   loadgen.cc           RunLoad(): the spec checked, the records laid out, the loops started,
//                        the unsent marked;
//   loadgen_loops.cc     the arrival models split over the loops, and each loop's figures;
//   loadgen_loop.cc      the curl multi event loop: epoll, libcurl's sockets and timer, the
//                        connection pool's shards, completions;
//   loadgen_transfer.cc  one stream: its easy handle's options and its callbacks, which stamp,
//                        frame and hand its events over;
//   loadgen_release.cc   the arrival model's releases turned into sends, on time;
//   loadgen_end.cc       how a transfer ends: completed, stalled, cut, cancelled or stopped.
#pragma once

#include <curl/curl.h>
#include <unistd.h>

#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "capq/measurement/loadgen.h"
#include "loop_board.h"
#include "ready_queue.h"
#include "receive_stamp.h"
#include "recorder.h"

namespace capq::internal::loadgen {

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

// ---- One transfer (loadgen_transfer.cc) ---------------------------------------------------------

struct Transfer {
  RawRecord* rec = nullptr;
  size_t slot_index = 0;    // index in its phase's request list
  size_t record_index = 0;  // index in LoadResult::records
  size_t shard = 0;         // the connection pool shard it takes its connection from
  EasyPtr easy;
  SseFramer framer;
  std::vector<SseEvent> framed;     // events one read completed, before they go to the recorder
  const MonoNs* wake_ns = nullptr;  // when the socket being read was first seen readable
  ReceiveProbe* probe = nullptr;    // the kernel's stamp of the socket being read
  int fd = -1;  // its connection's socket, as libcurl last asked the loop to watch it
  RecorderBatch* out = nullptr;  // the loop's batch for the recorder
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

bool StartsWithNoCase(std::string_view s, std::string_view prefix);

// Sets what every request of the run shares on `tr`'s easy handle (built already): the URL, the
// POST of `body`, the shared `headers`, the wire's settings and the transfer's callbacks.
void SetTransferOptions(const LoadSpec& spec, curl_slist* headers, const std::string& body,
                        Transfer* tr);

// Moves the events a read completed into the recorder's batch, stamped with the loop's wake and
// the kernel's receive stamp.
void HandOver(Transfer* tr, MonoNs kernel_ns);

// ---- The loops' arrival models (loadgen_loops.cc) -----------------------------------------------

struct LoopModels {
  std::unique_ptr<ArrivalModel> warmup, measured;
};
// One entry per loop the run uses: `wanted`, or one when the measured model cannot be split.
std::vector<LoopModels> SplitModels(const LoadSpec& spec, int wanted);

// ---- The event loop (loadgen_loop.cc) -----------------------------------------------------------

enum class PhaseEnd { kDone, kInterrupted, kStopped };

// One event loop of a run (loadgen.h, "Loops"): loop `index` of `board`'s, on one thread, with
// its own share of the requests.
class Loop {
 public:
  Loop(const LoadSpec& spec, curl_slist* headers, LoadResult* result, LoopBoard* board, int index)
      : spec_(spec), headers_(headers), result_(result), board_(board), index_(index) {}
  ~Loop();

  Status Init();

  // Runs the requests of `reqs` that `arrivals` releases (records already allocated at
  // recs[0..]), each when it says; the phase started at `start_ns`.
  PhaseEnd RunPhase(Phase phase, const std::vector<PlannedRequest>& reqs, RawRecord* recs,
                    ArrivalModel& arrivals, MonoNs start_ns);

  // Waits until the recorder handled everything so far, and takes the board's stop, if any.
  void FinishChecks();
  // Its share's sends, events, in-flight peak and send lateness; after FinishChecks().
  LoadResult::LoopFigures Figures() const;

  // Records that ended without the loop (never sent): decoded and written like the rest.
  void RecordUnsent(size_t record_index) { pending_.End(record_index, false); }
  const std::string& evidence_error() const { return recorder_->evidence_error(); }
  int64_t recorder_wait_ns() const { return recorder_->wait_ns(); }

  bool Cancelled() const {
    return spec_.cancel != nullptr && spec_.cancel->load(std::memory_order_relaxed);
  }
  bool Stopped() const { return !stopped_by_.empty() || decided_; }
  const std::string& stopped_by() const { return stopped_by_; }
  const std::string& stop_reason() const { return stop_reason_; }
  const std::optional<EarlyDecision>& decided() const { return decided_; }
  // What a request the harness cut or never sent after the stop is marked with.
  std::string HarnessCut() const {
    return decided_ ? std::string(kDecidedEarlyCut) : HarnessCutAfter(stopped_by_);
  }

 private:
  // The loop itself (loadgen_loop.cc).
  void ShardConnections(long max_c);
  void ReserveDescriptors(long n);
  size_t PickShard();
  static int SocketCb(CURL* easy, curl_socket_t s, int what, void* userp, void*);
  static int TimerCb(CURLM*, long timeout_ms, void* userp);
  void Wait(long max_wait_ms);
  void Drain();
  void MaybeProgress(bool force);

  // Releases and sends (loadgen_release.cc).
  std::unique_ptr<Transfer> Prepare(Release r);
  std::unique_ptr<Transfer> NewTransfer(size_t index, RawRecord* rec);
  void EasyInitFailed(Transfer* tr);
  void Launch(std::unique_ptr<Transfer> tr);
  void ReleaseDue();
  void RecordNotSent(const Release& r);
  bool ReleaseIsDue() const;
  int InFlightCap() const {
    return spec_.max_in_flight > 0 ? spec_.max_in_flight : std::numeric_limits<int>::max();
  }
  bool AtInFlightCap() const { return active_ >= InFlightCap(); }
  void ArmReleaseTimer();
  void StopDry();

  // Ends of transfers (loadgen_end.cc).
  void Adopt();
  void Complete(Transfer* tr, CURLcode rc, MonoNs done_ns);
  void TakeText(Transfer* tr, bool answered);
  void FinishFraming(Transfer* tr, MonoNs t);
  void TakeCheckerAnswer();
  void TickDecision();
  bool DecisionTicks() const;  // the measured phase of a run that may stop on a decision
  void Stop(const std::string& id, std::string why);
  void CheckStalls();
  void Cut(std::unique_ptr<Transfer>& tr, MonoNs now, const std::string& transport_error,
           const std::string& by_harness);
  void CancelAll(const std::string& transport_error, const std::string& by_harness);

  const LoadSpec& spec_;
  curl_slist* headers_;
  LoadResult* result_;
  LoopBoard* board_;
  int index_;
  static constexpr int kPeekEvery = 16;            // socket actions between two readiness glances
  static constexpr int kMaxActionsPerWait = 1024;  // then completions, stalls, progress get a turn
  static constexpr long kConnsPerShard = 64;       // connections libcurl walks per request
  // The early-decision rule's cadence (loadgen.h): a decided trial runs on for up to this long.
  static constexpr MonoNs kDecisionTickNs = 10'000'000;
  static constexpr long kMaxShards = 256;
  // Descriptors beyond one per connection: the epoll and timer fds, the evidence file, the
  // caller's own.
  static constexpr long kSpareDescriptors = 64;
  static constexpr size_t kNoShard = std::numeric_limits<size_t>::max();
  ReadyQueue ready_;
  MonoNs wake_ns_ = 0;     // when the socket being handled was first seen readable
  ReceiveProbe probe_;     // the kernel's stamp of that socket's queued bytes
  RecorderBatch pending_;  // what happened since the last hand-over
  Fd epfd_;
  Fd wake_;  // the board's stop or decision wakes the loop (LoopBoard::SetWake)
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
  int streams_ = 0, peak_in_flight_ = 0;  // for Figures()
  std::vector<MonoNs> lateness_;          // each measured send's, actual - intended
  bool stopping_ = false;  // cancelled or stopped: completions no longer start requests
  std::string stopped_by_, stop_reason_;  // fail fast: the request that stopped the run, and why
  std::optional<EarlyDecision> decided_;  // early decision: the verdict was certain
  MonoNs last_tick_ns_ = 0;               // the last moment handed to the rule
  LoadProgress progress_;
  MonoNs last_progress_ns_ = 0;
  std::unique_ptr<Recorder> recorder_;
  // Transfers of the current phase by request index; null once done. Declared after multi_ so
  // they are destroyed first, and ~Loop() removes any still attached.
  std::vector<std::unique_ptr<Transfer>> live_;
};

}  // namespace capq::internal::loadgen
