#include "capq/measurement/arrival.h"

#include <deque>

namespace capq {
namespace {

Release At(size_t index, MonoNs intended_ns) {
  Release r;
  r.index = index;
  r.intended_ns = intended_ns;
  return r;
}

class ClosedLoop final : public ArrivalModel {
 public:
  explicit ClosedLoop(int concurrency) : slots_(concurrency < 1 ? 1 : concurrency) {}
  const char* name() const override { return "closed_loop"; }
  void Begin(MonoNs start_ns, size_t count) override {
    count_ = count;
    next_ = 0;
    free_.assign(static_cast<size_t>(slots_), start_ns);
  }
  std::optional<Release> Peek() const override {
    if (next_ >= count_ || free_.empty()) return std::nullopt;
    return At(next_, free_.front());
  }
  Release Take() override {
    Release r = At(next_, free_.front());
    free_.pop_front();
    ++next_;
    return r;
  }
  void Finished(size_t, MonoNs done_ns) override { free_.push_back(done_ns); }
  bool Exhausted() const override { return next_ >= count_; }

 private:
  int slots_;
  size_t count_ = 0;
  size_t next_ = 0;
  std::deque<MonoNs> free_;  // one entry per free slot: when it became free
};

class Scheduled final : public ArrivalModel {
 public:
  explicit Scheduled(std::vector<MonoNs> offsets) : offsets_(std::move(offsets)) {}
  const char* name() const override { return "scheduled"; }
  void Begin(MonoNs start_ns, size_t count) override {
    start_ns_ = start_ns;
    count_ = count;
    next_ = 0;
  }
  std::optional<Release> Peek() const override {
    // A schedule shorter than its phase answers nothing for the rest (and is never exhausted).
    if (next_ >= count_ || next_ >= offsets_.size()) return std::nullopt;
    return At(next_, start_ns_ + offsets_[next_]);
  }
  Release Take() override {
    Release r = At(next_, start_ns_ + offsets_[next_]);
    ++next_;
    return r;
  }
  void Finished(size_t, MonoNs) override {}
  bool Exhausted() const override { return next_ >= count_; }

 private:
  std::vector<MonoNs> offsets_;
  MonoNs start_ns_ = 0;
  size_t count_ = 0;
  size_t next_ = 0;
};

}  // namespace

std::unique_ptr<ArrivalModel> ClosedLoopArrivals(int concurrency) {
  return std::make_unique<ClosedLoop>(concurrency);
}

std::unique_ptr<ArrivalModel> ScheduledArrivals(std::vector<MonoNs> offsets_ns) {
  return std::make_unique<Scheduled>(std::move(offsets_ns));
}

}  // namespace capq
