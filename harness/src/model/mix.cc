#include "capq/model/mix.h"

#include "capq/hash.h"

namespace capq {
namespace {

bool InBin(const MixClass& c, const TrafficSample& s) {
  return (!c.max_input_tokens || s.input_tokens <= *c.max_input_tokens) &&
         (!c.max_output_tokens || s.output_tokens <= *c.max_output_tokens);
}

bool Binned(const MixClass& c) { return c.max_input_tokens || c.max_output_tokens; }

// The class of each slot of one period, phase 0: smooth weighted round robin (each slot credits
// every class its weight and takes the richest, which pays W back).
std::vector<int> Period(const Mix& mix) {
  const int w = mix.Period();
  std::vector<int64_t> credit(mix.classes.size(), 0);
  std::vector<int> out;
  for (int i = 0; i < w; ++i) {
    size_t best = 0;
    for (size_t k = 0; k < credit.size(); ++k) {
      credit[k] += mix.classes[k].share;
      if (credit[k] > credit[best]) best = k;
    }
    credit[best] -= w;
    out.push_back(static_cast<int>(best));
  }
  return out;
}

}  // namespace

int Mix::Period() const {
  int w = 0;
  for (const MixClass& c : classes) w += c.share;
  return w;
}

Status AssignTraffic(const std::vector<TrafficSample>& samples, Mix* mix) {
  for (MixClass& c : mix->classes) c.samples.clear();
  for (const TrafficSample& s : samples) {
    for (MixClass& c : mix->classes) {
      const bool member = Binned(c) ? InBin(c, s) : s.traffic_class == c.match;
      if (member) {
        c.samples.push_back(s);
        break;
      }
    }
  }
  for (const MixClass& c : mix->classes) {
    if (c.samples.empty()) {
      return Status::InvalidArgument("class " + c.name + " has no sample in " + mix->traffic);
    }
  }
  return Status::Ok();
}

std::vector<int> MixSequence(const Mix& mix, uint64_t seed, int n) {
  const std::vector<int> period = Period(mix);
  std::vector<int> out;
  if (period.empty()) return out;
  const uint64_t phase = SplitMix64(seed ^ 0x6d6978ULL) % period.size();  // "mix"
  for (int i = 0; i < n; ++i)
    out.push_back(period[(phase + static_cast<uint64_t>(i)) % period.size()]);
  return out;
}

const TrafficSample& MixSample(const Mix& mix, int k, uint64_t seed, int slot) {
  const std::vector<TrafficSample>& s = mix.classes[static_cast<size_t>(k)].samples;
  const uint64_t h = SplitMix64(SplitMix64(seed ^ 0x70616972ULL) ^ static_cast<uint64_t>(slot));
  return s[h % s.size()];
}

int MixMinClassRequests(const Mix& mix, int k, int n) {
  const int w = mix.Period();
  return w > 0 ? n / w * mix.classes[static_cast<size_t>(k)].share : 0;
}

int MixRequestsNeeded(const Mix& mix, int k, int need) {
  const int share = mix.classes[static_cast<size_t>(k)].share;
  return (need + share - 1) / share * mix.Period();
}

}  // namespace capq
