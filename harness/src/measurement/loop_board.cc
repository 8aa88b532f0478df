#include "loop_board.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>

namespace capq::internal {

LoopBoard::LoopBoard(int loops, size_t measured, const EarlyDecisionRules& rules,
                     std::function<void()> at_barrier)
    : rules_(rules),
      wake_(static_cast<size_t>(loops), -1),
      watermark_(static_cast<size_t>(loops), 0),
      progress_(static_cast<size_t>(loops)),
      at_barrier_(std::move(at_barrier)),
      barrier_(loops, AtBarrier{this}) {
  if (rules_.enabled) live_.resize(measured);
}

void LoopBoard::Wake() {
  const uint64_t one = 1;
  for (int fd : wake_) {
    if (fd >= 0) (void)!::write(fd, &one, sizeof one);
  }
}

void LoopBoard::Stop(const std::string& id, std::string why) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_ || decided_) return;
    stop_.emplace(id, std::move(why));
  }
  raised_.store(true, std::memory_order_release);
  Wake();
}

std::optional<std::pair<std::string, std::string>> LoopBoard::StopSeen() {
  std::lock_guard<std::mutex> l(mu_);
  return stop_;
}

void LoopBoard::Offer(EarlyDecision d) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_ || offer_) return;
    offer_ = std::move(d);
  }
  raised_.store(true, std::memory_order_release);
  Wake();
}

std::optional<EarlyDecision> LoopBoard::TakeOffer() {
  std::lock_guard<std::mutex> l(mu_);
  if (stop_ || !offer_) return std::nullopt;
  decided_ = true;
  return offer_;
}

std::optional<EarlyDecision> LoopBoard::Taken() {
  std::lock_guard<std::mutex> l(mu_);
  return decided_ ? offer_ : std::nullopt;
}

std::optional<MonoNs> LoopBoard::Watermark(int loop, MonoNs now_ns) {
  std::lock_guard<std::mutex> l(mu_);
  MonoNs& w = watermark_[static_cast<size_t>(loop)];
  w = std::max(w, now_ns);
  const MonoNs low = *std::min_element(watermark_.begin(), watermark_.end());
  if (low == 0 || low == kDoneNs) return std::nullopt;
  return low;
}

std::optional<EarlyDecision> LoopBoard::Decide(MonoNs now_ns, MonoNs measured_start_ns) {
  std::lock_guard<std::mutex> l(mu_);
  if (stop_ || offer_ || live_.empty()) return std::nullopt;
  return DecideEarly(rules_, live_, now_ns, measured_start_ns);
}

void LoopBoard::Publish(int loop, const LoadProgress& p) {
  std::lock_guard<std::mutex> l(mu_);
  progress_[static_cast<size_t>(loop)] = p;
}

LoadProgress LoopBoard::Sum() {
  std::lock_guard<std::mutex> l(mu_);
  LoadProgress s = progress_[0];
  for (size_t i = 1; i < progress_.size(); ++i) {
    const LoadProgress& p = progress_[i];
    s.total += p.total;
    s.started += p.started;
    s.completed += p.completed;
    s.failed += p.failed;
    s.in_flight += p.in_flight;
    s.now_ns = std::max(s.now_ns, p.now_ns);
  }
  return s;
}

}  // namespace capq::internal
