#include "capq/measurement/arrival.h"

#include <algorithm>
#include <deque>

namespace capq {
namespace {

Release At(size_t index, MonoNs intended_ns) {
  Release r;
  r.index = index;
  r.intended_ns = intended_ns;
  return r;
}

// A share of a phase's requests (ArrivalModel::Split): first, first + stride, first + 2 stride ...
struct Share {
  size_t first = 0, stride = 1;
  bool Has(size_t index) const { return index % stride == first; }
};

// A share of a split model that got no slot: it releases nothing and is exhausted at once.
class Nothing final : public ArrivalModel {
 public:
  explicit Nothing(const char* name) : name_(name) {}
  const char* name() const override { return name_; }
  void Begin(MonoNs, size_t) override {}
  std::optional<Release> Peek() const override { return std::nullopt; }
  Release Take() override { return Release{}; }
  void Finished(size_t, MonoNs) override {}
  bool Exhausted() const override { return true; }
  bool Releases(size_t) const override { return false; }

 private:
  const char* name_;
};

class ClosedLoop final : public ArrivalModel {
 public:
  explicit ClosedLoop(int concurrency, Share share = {})
      : slots_(concurrency < 1 ? 1 : concurrency), share_(share) {}
  const char* name() const override { return "closed_loop"; }
  void Begin(MonoNs start_ns, size_t count) override {
    count_ = count;
    next_ = share_.first;
    free_.assign(static_cast<size_t>(slots_), start_ns);
  }
  std::optional<Release> Peek() const override {
    if (next_ >= count_ || free_.empty()) return std::nullopt;
    return At(next_, free_.front());
  }
  Release Take() override {
    Release r = At(next_, free_.front());
    free_.pop_front();
    next_ += share_.stride;
    return r;
  }
  void Finished(size_t, MonoNs done_ns) override { free_.push_back(done_ns); }
  bool Exhausted() const override { return next_ >= count_; }
  bool Releases(size_t index) const override { return share_.Has(index); }
  // Slot k of m shares: the slots dealt out as evenly as they go.
  std::vector<std::unique_ptr<ArrivalModel>> Split(int n) const override {
    std::vector<std::unique_ptr<ArrivalModel>> out;
    const int m = std::max(1, std::min(n, slots_));
    for (int k = 0; k < n; ++k) {
      if (k >= m) {
        out.push_back(std::make_unique<Nothing>(name()));
        continue;
      }
      const int slots = slots_ / m + (k < slots_ % m ? 1 : 0);
      out.push_back(std::make_unique<ClosedLoop>(
          slots, Share{static_cast<size_t>(k), static_cast<size_t>(m)}));
    }
    return out;
  }

 private:
  int slots_;
  Share share_;
  size_t count_ = 0;
  size_t next_ = 0;
  std::deque<MonoNs> free_;  // one entry per free slot: when it became free
};

class Scheduled final : public ArrivalModel {
 public:
  explicit Scheduled(std::vector<MonoNs> offsets, Share share = {})
      : offsets_(std::move(offsets)), share_(share) {}
  const char* name() const override { return "scheduled"; }
  void Begin(MonoNs start_ns, size_t count) override {
    start_ns_ = start_ns;
    count_ = count;
    next_ = share_.first;
  }
  std::optional<Release> Peek() const override {
    // A schedule shorter than its phase answers nothing for the rest (and is never exhausted).
    if (next_ >= count_ || next_ >= offsets_.size()) return std::nullopt;
    return At(next_, start_ns_ + offsets_[next_]);
  }
  Release Take() override {
    Release r = At(next_, start_ns_ + offsets_[next_]);
    next_ += share_.stride;
    return r;
  }
  void Finished(size_t, MonoNs) override {}
  bool Exhausted() const override { return next_ >= count_; }
  bool Releases(size_t index) const override { return share_.Has(index); }
  // Each share keeps the whole schedule and releases its own requests on it.
  std::vector<std::unique_ptr<ArrivalModel>> Split(int n) const override {
    std::vector<std::unique_ptr<ArrivalModel>> out;
    for (int k = 0; k < n; ++k) {
      out.push_back(std::make_unique<Scheduled>(
          offsets_, Share{static_cast<size_t>(k), static_cast<size_t>(std::max(n, 1))}));
    }
    return out;
  }

 private:
  std::vector<MonoNs> offsets_;
  Share share_;
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
