// The sample-size rules of a row (row_loader.h): how many measured requests a gated percentile
// needs, and how many an open-loop row measures at its lowest rate.
#include <algorithm>
#include <cmath>

#include "capq/model/row_loader.h"

namespace capq {

int MinRequestsForPercentile(double percentile) {
  if (!(percentile > 0 && percentile < 100)) return 0;
  // The epsilon absorbs binary rounding (100 / 0.1 is 1000.0000000000001, not 1000).
  double need = std::ceil(100.0 / (100.0 - percentile) - 1e-9);
  return need > 1e9 ? 1000000000 : static_cast<int>(need);
}

int MinRequestsPerThirdForPercentile(double percentile) {
  if (!(percentile > 0 && percentile < 100)) return 0;
  double need = std::ceil(200.0 / (100.0 - percentile) - 1e-9);
  return need > 1e9 ? 1000000000 : static_cast<int>(need);
}

int BaselineRequests(const Row& row) {
  const int full = row.measured.RequestsAt(1);
  if (row.open_loop() || row.reuse() || row.mix) return full;
  int need = kSeedBaselineRequests;
  for (const SloTier& tier : AllTiers(row)) {
    for (const SloGate& g : tier.slo) need = std::max(need, MinRequestsForPercentile(g.percentile));
  }
  return std::min(need, full);
}

int64_t MeasuredRequestsAtOneStep(const Row& row) {
  const OpenLoop& o = row.workload.open_loop;
  if (!row.open_loop()) return 0;
  if (o.requests) return *o.requests;
  if (!o.duration_s) return 0;
  // The relative epsilon absorbs binary rounding: 90 s * 0.7 requests/s is 62.99999999999999.
  const double x = *o.duration_s * o.rate_step_rps;
  const double n = std::floor(x + 1e-9 * std::max(1.0, x));
  return n > 1e15 ? int64_t{1'000'000'000'000'000} : static_cast<int64_t>(n);
}

}  // namespace capq
