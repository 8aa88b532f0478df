// The load generator's recorder (loadgen.h): the thread beside the event loop that decodes each
// stream as its events arrive, writes the raw evidence and runs the fail-fast check, so the loop
// itself only stamps, frames and hands over.
//
// Hand-over: the loop packs what happened (a send, an event, a record's end) into one buffer per
// turn (RecorderBatch) and posts it; no event is a heap object of its own, so nothing allocated on
// one thread is freed on the other and memory stays flat. The backlog the recorder has not read
// yet is bounded (kMaxBacklogBytes): past it, Post() waits, and the time the loop spent waiting is
// counted (LoadResult::recorder_wait_ns), since the client then reads its sockets late.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "capq/measurement/decode.h"
#include "capq/measurement/early_decision.h"
#include "capq/measurement/evidence_log.h"
#include "capq/measurement/loadgen.h"
#include "loop_board.h"

namespace capq::internal {

class RecorderBatch {
 public:
  enum Kind : uint8_t { kSent, kEvent, kEnd, kTick };
  void Sent(size_t record) { Put(kSent, record, false, nullptr); }
  // The moment `now_ns` of the measured phase that began at `measured_start_ns`: everything the
  // loop read before it was put in before it. The recorder asks the early-decision rule then.
  void Tick(MonoNs now_ns, MonoNs measured_start_ns);
  void Event(size_t record, const SseEvent& ev) { Put(kEvent, record, false, &ev); }
  // `check`: ask LoadSpec::on_complete_check. Only for streams that ended by themselves before a
  // stop; the ones the harness cut or never sent are not the server's failures.
  void End(size_t record, bool check) { Put(kEnd, record, check, nullptr); }

  bool empty() const { return bytes_.empty(); }
  size_t size() const { return bytes_.size(); }
  void clear() { bytes_.clear(); }
  void swap(RecorderBatch& o) { bytes_.swap(o.bytes_); }
  void Release() { std::string().swap(bytes_); }  // clear and give its memory back
  void Append(const RecorderBatch& o) { bytes_.append(o.bytes_); }

  // Calls fn(kind, record, check, event) for each item in order; `event` is one object reused.
  template <typename Fn>
  void ForEach(Fn&& fn) const;

 private:
  struct Head {
    uint8_t kind, check, truncated;
    uint32_t record;
    int64_t arrival_ns, wake_ns, kernel_ns;
    uint32_t data_bytes;
  };
  void Put(Kind kind, size_t record, bool check, const SseEvent* ev);
  std::string bytes_;
};

template <typename Fn>
void RecorderBatch::ForEach(Fn&& fn) const {
  SseEvent ev;
  size_t at = 0;
  while (at + sizeof(Head) <= bytes_.size()) {
    Head h;
    std::memcpy(&h, bytes_.data() + at, sizeof h);
    at += sizeof h;
    ev.arrival_ns = h.arrival_ns;
    ev.wake_ns = h.wake_ns;
    ev.kernel_ns = h.kernel_ns;
    ev.truncated = h.truncated != 0;
    ev.data.assign(bytes_, at, h.data_bytes);
    at += h.data_bytes;
    fn(static_cast<Kind>(h.kind), static_cast<size_t>(h.record), h.check != 0, ev);
  }
}

class Recorder {
 public:
  // About fifteen thousand events: enough to ride out a scheduling hiccup, small enough that the
  // three buffers (the loop's, the queue, the one being handled) stay a few MB at any stream count.
  static constexpr size_t kMaxBacklogBytes = 4u << 20;
  using Check = std::function<std::optional<std::string>(const RawRecord&, const RequestResult&)>;

  // The recorder of loop `loop` of `board`'s run. result->records and result->results (sized
  // alike) must not be resized while it runs; it touches only the records its loop posts.
  Recorder(const LoadSpec& spec, LoadResult* result, LoopBoard* board, int loop);
  ~Recorder();  // handles what was posted, then joins
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Takes the loop's batch (leaving it empty); waits while the backlog is over its bound.
  void Post(RecorderBatch* batch);
  // Blocks until everything posted was handled (a few milliseconds at a phase's end).
  void WaitIdle();
  // A record that fails its check stops the run on the board (LoopBoard::Stop); the early
  // decision, once the rule (LoadSpec::early_decision) reaches one, is offered there.
  // The first error writing the evidence ("" = none). Only after WaitIdle().
  const std::string& evidence_error() const { return evidence_error_; }
  int64_t wait_ns() const { return wait_ns_; }  // loop time spent in Post() waiting
  int64_t events() const { return events_; }    // events handled; only after WaitIdle()

 private:
  void Run();
  void Handle(RecorderBatch::Kind kind, size_t index, bool check, const SseEvent& ev);
  void End(const RawRecord& rec, size_t index, bool check);
  // What the measured request at `index` of the records is known to be now (early decision).
  void Track(RecorderBatch::Kind kind, size_t index);
  void AskDecision(MonoNs now_ns, MonoNs measured_start_ns);
  void Write(const std::string& line, bool flush);

  Check check_;
  EvidenceWriter* evidence_;
  const std::vector<RawRecord>* records_;
  std::vector<RequestResult>* results_;
  std::vector<std::optional<StreamDecoder>> decoders_;  // the streams in flight
  LoopBoard* board_;
  int loop_;
  size_t first_measured_ = 0;      // records before it are warm-ups
  std::vector<char> first_token_;  // per measured request: its first token is on the board
  std::string evidence_error_;
  int64_t wait_ns_ = 0;
  int64_t events_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  RecorderBatch queue_;
  bool busy_ = false, quit_ = false;
  std::thread thread_;  // last: it starts in the constructor, after the members it uses
};

}  // namespace capq::internal
