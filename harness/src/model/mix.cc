#include "capq/model/mix.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "capq/hash.h"
#include "capq/model/prefix_blocks.h"
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

namespace {

Status SampleError(const Mix& mix, const TrafficSample& s, const std::string& what) {
  return Status::InvalidArgument(mix.traffic + ":" + std::to_string(s.line) + ": " + what);
}

// The trace's block size, scaled to whole tokens: every sample must carry blocks of that one size,
// as many as its input needs (the last one partial).
Result<int64_t> FittedBlockTokens(const Mix& mix, double scale) {
  int64_t size = 0;
  for (const MixClass& c : mix.classes) {
    for (const TrafficSample& s : c.samples) {
      if (s.block_ids.empty()) {
        return SampleError(mix, s,
                           "no prefix_blocks, but mix.prefix_blocks builds every prompt "
                           "from its sample's blocks");
      }
      if (size == 0) size = s.block_tokens;
      const auto need = static_cast<size_t>((s.input_tokens + size - 1) / size);
      if (s.block_tokens != size || s.block_ids.size() != need) {
        return SampleError(mix, s,
                           std::to_string(s.block_ids.size()) + " blocks of " +
                               std::to_string(s.block_tokens) + " tokens for an input of " +
                               std::to_string(s.input_tokens) + "; the trace's blocks of " +
                               std::to_string(size) + " need " + std::to_string(need));
      }
    }
  }
  return ScaledBlockTokens(size, scale, "mix.lengths.scale");
}

// A sample's input with its blocks fitted: every whole block `block` tokens, the last (partial)
// one scaled and at least a token.
int64_t FittedBlockInput(const TrafficSample& s, int64_t block, double scale) {
  const auto whole = static_cast<int64_t>(s.block_ids.size()) - 1;
  const int64_t last = s.input_tokens - whole * s.block_tokens;
  return whole * block + std::max<int64_t>(1, std::llround(static_cast<double>(last) * scale));
}

}  // namespace

Status FitTraffic(Mix* mix) {
  LengthFit& fit = mix->lengths;
  fit.scaled = fit.capped = 0;
  const auto scaled = [&](int64_t v) {
    return std::max<int64_t>(1, std::llround(static_cast<double>(v) * fit.scale));
  };
  if (mix->blocks) {
    Result<int64_t> block = FittedBlockTokens(*mix, fit.scale);
    if (!block.ok()) return block.status();
    mix->blocks->block_tokens = *block;
  }
  for (MixClass& c : mix->classes) {
    for (TrafficSample& s : c.samples) {
      const int64_t in = s.input_tokens, out = s.output_tokens;
      if (mix->blocks) {
        s.input_tokens = FittedBlockInput(s, mix->blocks->block_tokens, fit.scale);
        s.block_tokens = mix->blocks->block_tokens;
      } else {
        s.input_tokens = scaled(in);
      }
      s.output_tokens = scaled(out);
      fit.scaled += s.input_tokens != in || s.output_tokens != out ? 1 : 0;
      if (fit.cap_input_tokens && s.input_tokens > *fit.cap_input_tokens) {
        s.input_tokens = *fit.cap_input_tokens;
        if (mix->blocks)
          s.block_ids.resize(
              static_cast<size_t>((s.input_tokens + s.block_tokens - 1) / s.block_tokens));
        ++fit.capped;
      }
      if (fit.context_tokens && s.input_tokens + s.output_tokens > *fit.context_tokens) {
        return SampleError(*mix, s,
                           std::to_string(in) + " + " + std::to_string(out) +
                               " tokens, fitted to " + std::to_string(s.input_tokens) + " + " +
                               std::to_string(s.output_tokens) + " (scale " +
                               FormatFixed(fit.scale, 3) + "), exceed the context of " +
                               std::to_string(*fit.context_tokens) +
                               " tokens; lower mix.lengths.scale or set cap_input_tokens");
      }
    }
  }
  return Status::Ok();
}

Status OrderReplay(Mix* mix, size_t samples) {
  std::vector<std::tuple<int, int, int>> lines;  // (line, class, index)
  for (size_t k = 0; k < mix->classes.size(); ++k) {
    const auto& s = mix->classes[k].samples;
    for (size_t i = 0; i < s.size(); ++i) {
      lines.emplace_back(s[i].line, static_cast<int>(k), static_cast<int>(i));
    }
  }
  std::sort(lines.begin(), lines.end());
  if (lines.size() != samples) {
    return Status::InvalidArgument(std::to_string(samples - lines.size()) + " of the " +
                                   std::to_string(samples) + " samples of " + mix->traffic +
                                   " are in no class; a replay sends every one");
  }
  mix->order.clear();
  for (MixClass& c : mix->classes) c.share = static_cast<int>(c.samples.size());
  double last = 0;
  for (const auto& [line, k, i] : lines) {
    const auto& at =
        mix->classes[static_cast<size_t>(k)].samples[static_cast<size_t>(i)].arrival_offset_s;
    const std::string where = mix->traffic + ":" + std::to_string(line) + ": ";
    if (!at) return Status::InvalidArgument(where + "no arrival_offset_s to replay");
    if (*at < last) return Status::InvalidArgument(where + "arrival_offset_s goes back in time");
    last = *at;
    mix->order.emplace_back(k, i);
  }
  if (!(last > 0)) {
    return Status::InvalidArgument(mix->traffic +
                                   ": every request arrives at once; a replay "
                                   "needs a trace that spans some time");
  }
  return Status::Ok();
}

const TrafficSample& ReplaySample(const Mix& mix, int64_t k, int* cls) {
  const auto& [c, i] = mix.order[static_cast<size_t>(k % static_cast<int64_t>(mix.order.size()))];
  *cls = c;
  return mix.classes[static_cast<size_t>(c)].samples[static_cast<size_t>(i)];
}

namespace {
double Offset(const Mix& mix, size_t i) {
  const auto& [c, j] = mix.order[i];
  return mix.classes[static_cast<size_t>(c)]
      .samples[static_cast<size_t>(j)]
      .arrival_offset_s.value_or(0);
}
}  // namespace

double ReplayTraceSeconds(const Mix& mix, int64_t k) {
  const auto n = static_cast<int64_t>(mix.order.size());
  const double first = Offset(mix, 0), span = Offset(mix, static_cast<size_t>(n - 1)) - first;
  const double cycle = n > 1 ? span * static_cast<double>(n) / static_cast<double>(n - 1) : 0;
  return Offset(mix, static_cast<size_t>(k % n)) - first + static_cast<double>(k / n) * cycle;
}

int64_t ReplayOffsetNs(const Mix& mix, double speed, int64_t k) {
  return std::llround(ReplayTraceSeconds(mix, k) / speed * 1e9);
}

int64_t ReplayRampRequests(const Mix& mix, double speed, int64_t ramp_ns) {
  int64_t ramp = 0;
  while (ReplayOffsetNs(mix, speed, ramp) < ramp_ns) ++ramp;
  return ramp;
}

double ReplaySpeed(const Mix& mix, double rate_rps, double ramp_s, int64_t requests) {
  const int64_t ramp_ns = std::llround(ramp_s * 1e9);
  int64_t total = std::max<int64_t>(2, requests);
  double speed = 1;
  for (int round = 0; round < 8; ++round) {
    // total requests at rate_rps span (total - 1) / rate_rps seconds.
    speed = ReplayTraceSeconds(mix, total - 1) * rate_rps / static_cast<double>(total - 1);
    const int64_t ramp = ReplayRampRequests(mix, speed, ramp_ns);
    if (ramp + requests == total) break;
    total = std::max<int64_t>(2, ramp + requests);
  }
  return speed;
}

int ReplayMinClassRequests(const Mix& mix, int k, int n) {
  const auto size = static_cast<int64_t>(mix.order.size());
  if (size == 0 || n <= 0) return 0;
  std::vector<int> in(static_cast<size_t>(size), 0);
  for (int64_t i = 0; i < size; ++i)
    in[static_cast<size_t>(i)] = mix.order[static_cast<size_t>(i)].first == k;
  // A window of n requests holds whole cycles and a part: slide the part over one cycle.
  const int64_t whole = n / size, part = n % size;
  const int per_cycle = static_cast<int>(std::count(in.begin(), in.end(), 1));
  int have = 0;
  for (int64_t i = 0; i < part; ++i) have += in[static_cast<size_t>(i)];
  int least = have;
  for (int64_t s = 1; s < size && part > 0; ++s) {
    have += in[static_cast<size_t>((s + part - 1) % size)] - in[static_cast<size_t>(s - 1)];
    least = std::min(least, have);
  }
  return static_cast<int>(whole) * per_cycle + least;
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
