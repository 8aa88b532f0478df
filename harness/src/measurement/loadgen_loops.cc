// The load generator's loops (loadgen.h, "Loops"): how many, the arrival models split over them,
// and what each one did.
#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>

#include "loadgen_internal.h"

namespace capq {

int LoopsWanted(int loops) {
  if (loops > 0) return loops;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

nlohmann::json LoopFiguresToJson(const std::vector<LoadResult::LoopFigures>& loops) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t k = 0; k < loops.size(); ++k) {
    const LoadResult::LoopFigures& f = loops[k];
    out.push_back({{"loop", k},
                   {"streams", f.streams},
                   {"events", f.events},
                   {"peak_in_flight", f.peak_in_flight},
                   {"measured_sends", f.measured_sends},
                   {"send_lateness_p50_ms", f.send_lateness_p50_ms},
                   {"send_lateness_p99_ms", f.send_lateness_p99_ms},
                   {"send_lateness_max_ms", f.send_lateness_max_ms},
                   {"recorder_wait_ns", f.recorder_wait_ns}});
  }
  return out;
}

std::vector<std::string> LoopFigureLines(const std::vector<LoadResult::LoopFigures>& loops) {
  std::vector<std::string> out;
  for (size_t k = 0; k < loops.size(); ++k) {
    const LoadResult::LoopFigures& f = loops[k];
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "loop %zu/%zu: %d streams, %lld events, peak %d in flight, send lateness p50 "
                  "%.3f ms p99 %.3f ms max %.3f ms over %d measured sends",
                  k + 1, loops.size(), f.streams, static_cast<long long>(f.events),
                  f.peak_in_flight, f.send_lateness_p50_ms, f.send_lateness_p99_ms,
                  f.send_lateness_max_ms, f.measured_sends);
    out.push_back(buf);
  }
  return out;
}

}  // namespace capq

namespace capq::internal::loadgen {

// Each loop's arrival models: the warm-up's closed loop and the measured model, split over
// `wanted` loops; one loop when the measured model cannot be split.
std::vector<LoopModels> SplitModels(const LoadSpec& spec, int wanted) {
  std::unique_ptr<ArrivalModel> measured =
      spec.measured_arrivals ? spec.measured_arrivals() : ClosedLoopArrivals(spec.concurrency);
  std::unique_ptr<ArrivalModel> warmup = ClosedLoopArrivals(spec.warmup_concurrency);
  std::vector<LoopModels> out;
  std::vector<std::unique_ptr<ArrivalModel>> shares;
  if (wanted > 1) shares = measured->Split(wanted);
  if (shares.empty()) {
    out.push_back({std::move(warmup), std::move(measured)});
    return out;
  }
  std::vector<std::unique_ptr<ArrivalModel>> warm = warmup->Split(wanted);
  for (size_t k = 0; k < shares.size(); ++k) {
    out.push_back({std::move(warm[k]), std::move(shares[k])});
  }
  return out;
}

namespace {

double PercentileMs(const std::vector<MonoNs>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t at = std::min(sorted.size() - 1, static_cast<size_t>(q * (sorted.size() - 1) + 0.5));
  return static_cast<double>(sorted[at]) / 1e6;
}

}  // namespace

LoadResult::LoopFigures Loop::Figures() const {
  LoadResult::LoopFigures f;
  f.streams = streams_;
  f.events = recorder_->events();
  f.peak_in_flight = peak_in_flight_;
  std::vector<MonoNs> late = lateness_;
  std::sort(late.begin(), late.end());
  f.measured_sends = static_cast<int>(late.size());
  f.send_lateness_p50_ms = PercentileMs(late, 0.50);
  f.send_lateness_p99_ms = PercentileMs(late, 0.99);
  f.send_lateness_max_ms = PercentileMs(late, 1.0);
  f.recorder_wait_ns = recorder_->wait_ns();
  return f;
}

}  // namespace capq::internal::loadgen
