// What the event loops of one run share (loadgen.h, "Loops"): little, and none of it per event.
// Each loop has its own thread, curl multi handle, epoll, connection pool, transfers and recorder;
// the board carries the signals that must reach every loop (a stop, an early decision), the
// early-decision rule's view of every measured request, the evidence file's lock, the phase
// barrier and the progress sum.
//
// Stops: the first fail-fast answer, stall or dry model of any loop stops the run; each loop
// takes the board's first stop at its next turn (its eventfd wakes it at once), so every loop
// reports the same request. An early decision is offered by any loop's recorder once the rule
// holds for what every loop had read by then (Watermark), and taken by each loop that still has
// requests to end.
#pragma once

#include <atomic>
#include <barrier>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "capq/measurement/early_decision.h"
#include "capq/measurement/loadgen.h"

namespace capq::internal {

class LoopBoard {
 public:
  // `measured`: the number of measured requests (their LiveLatency is kept when `rules` are
  // enabled). `at_barrier` runs once when every loop reached the phase barrier.
  LoopBoard(int loops, size_t measured, const EarlyDecisionRules& rules,
            std::function<void()> at_barrier);

  int loops() const { return static_cast<int>(watermark_.size()); }

  // Wakes loop `loop`'s epoll on a stop or a decision (an eventfd it watches, never read).
  void SetWake(int loop, int fd) { wake_[static_cast<size_t>(loop)] = fd; }

  // A stop at request `id`: kept unless the run stopped or was decided already.
  void Stop(const std::string& id, std::string why);
  // The first stop, once there is one.
  std::optional<std::pair<std::string, std::string>> StopSeen();
  // An early decision offered; kept unless a stop or a decision came first.
  void Offer(EarlyDecision d);
  // The offered decision, for a loop that stops on it; nullopt when a stop came first (a stop
  // is refused from then on).
  std::optional<EarlyDecision> TakeOffer();
  // Whether a loop stopped on the offered decision, and the decision.
  std::optional<EarlyDecision> Taken();
  // Cheap: whether a stop or a decision may be waiting (StopSeen, Offered).
  bool Raised() const { return raised_.load(std::memory_order_acquire); }

  // Early decision: the moment up to which every loop's reads were handed to the rule, once loop
  // `loop` handed over everything it read before `now_ns`; nullopt while a loop has not yet.
  std::optional<MonoNs> Watermark(int loop, MonoNs now_ns);
  // Loop `loop` ended its measured phase and its recorder handled all of it.
  void Done(int loop) { Watermark(loop, kDoneNs); }
  static constexpr MonoNs kDoneNs = std::numeric_limits<MonoNs>::max();

  // The rule's view of the measured requests: each recorder writes its own requests' entries,
  // under the lock; the rule reads all of them under it.
  bool tracks() const { return rules_.enabled; }
  template <typename Fn>
  void Track(size_t measured_index, Fn&& fn) {
    std::lock_guard<std::mutex> l(mu_);
    fn(live_[measured_index]);
  }
  std::optional<EarlyDecision> Decide(MonoNs now_ns, MonoNs measured_start_ns);

  // The evidence file is written by every loop's recorder, a line or a flush at a time.
  std::mutex& evidence_mu() { return evidence_mu_; }

  // Every loop ends its warm-up here, so the measured phase starts at one moment for all.
  void ArriveAndWait() { barrier_.arrive_and_wait(); }

  // Progress: each loop's own, summed.
  void Publish(int loop, const LoadProgress& p);
  LoadProgress Sum();

 private:
  void Wake();

  EarlyDecisionRules rules_;
  std::vector<int> wake_;
  std::atomic<bool> raised_{false};
  bool decided_ = false;  // a loop took the offer
  std::mutex mu_;
  std::optional<std::pair<std::string, std::string>> stop_;
  std::optional<EarlyDecision> offer_;
  std::vector<MonoNs> watermark_;  // per loop; 0 = nothing handed over yet
  std::vector<LiveLatency> live_;
  std::vector<LoadProgress> progress_;
  std::mutex evidence_mu_;
  std::function<void()> at_barrier_;
  struct AtBarrier {
    LoopBoard* board;
    void operator()() noexcept {
      if (board->at_barrier_) board->at_barrier_();
    }
  };
  std::barrier<AtBarrier> barrier_;
};

}  // namespace capq::internal
