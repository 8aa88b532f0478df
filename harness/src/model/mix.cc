#include "capq/model/mix.h"

#include <algorithm>
#include <cmath>

#include "capq/hash.h"
#include "capq/text.h"

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

Status FitTraffic(Mix* mix) {
  LengthFit& fit = mix->lengths;
  fit.scaled = fit.capped = 0;
  const auto scaled = [&](int64_t v) {
    return std::max<int64_t>(1, std::llround(static_cast<double>(v) * fit.scale));
  };
  for (MixClass& c : mix->classes) {
    for (TrafficSample& s : c.samples) {
      const int64_t in = s.input_tokens, out = s.output_tokens;
      s.input_tokens = scaled(in);
      s.output_tokens = scaled(out);
      fit.scaled += s.input_tokens != in || s.output_tokens != out ? 1 : 0;
      if (fit.cap_input_tokens && s.input_tokens > *fit.cap_input_tokens) {
        s.input_tokens = *fit.cap_input_tokens;
        ++fit.capped;
      }
      if (fit.context_tokens && s.input_tokens + s.output_tokens > *fit.context_tokens) {
        return Status::InvalidArgument(
            mix->traffic + ":" + std::to_string(s.line) + ": " + std::to_string(in) + " + " +
            std::to_string(out) + " tokens, fitted to " + std::to_string(s.input_tokens) + " + " +
            std::to_string(s.output_tokens) + " (scale " + FormatFixed(fit.scale, 3) +
            "), exceed the context of " + std::to_string(*fit.context_tokens) +
            " tokens; lower mix.lengths.scale or set cap_input_tokens");
      }
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
