// Mixed-class replay: a row's traffic classes, their shares, and the seeded order in which a trial
// sends them (the replay's arrival plan; closed loop only).
//
// Shares are integer weights w_k with W = sum w_k. The class of slot i is the smooth weighted
// round-robin sequence of period W, started at a seeded phase: every W consecutive slots hold
// exactly w_k of class k, so the proportions hold in the whole trial and in every window of it.
// Within a class, each slot takes one whole sample (input and output length together), chosen by
// a seeded hash of the slot.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "capq/model/traffic.h"

namespace capq {

struct MixClass {
  std::string name;
  int share = 1;
  // Membership: the file's class field equals `match` (default the name), or, when bins are
  // declared, a sample's lengths are at most these (the first class whose bin holds it).
  std::string match;
  std::optional<int64_t> max_input_tokens, max_output_tokens;
  std::vector<TrafficSample> samples;  // filled by AssignTraffic
};

// How a row fits a trace's lengths to its server (mix.lengths): each sample's input and output
// multiplied by `scale` (rounded to the nearest token, at least 1), then an input above
// `cap_input_tokens` cut to it. A class's bins hold the trace's own lengths; what is sent is the
// fitted pair. `scaled` and `capped` count the samples each step changed.
struct LengthFit {
  double scale = 1;
  std::optional<int64_t> cap_input_tokens;
  // The server's context window: a fitted sample whose input + output exceeds it is refused.
  std::optional<int64_t> context_tokens;
  int scaled = 0, capped = 0;
  bool Declared() const { return scale != 1 || cap_input_tokens || context_tokens; }
};

struct Mix {
  std::string traffic;  // absolute path of the traffic file
  std::vector<MixClass> classes;
  LengthFit lengths;
  int Period() const;  // W
};

// Puts each sample in its class; an error names the first class left without samples.
Status AssignTraffic(const std::vector<TrafficSample>& samples, Mix* mix);

// Fits every class's samples (after AssignTraffic) and counts what changed; an error names the
// traffic file's line of the first sample that does not fit the context, with its numbers.
Status FitTraffic(Mix* mix);

// The class index of each of `n` slots of a trial with `seed`.
std::vector<int> MixSequence(const Mix& mix, uint64_t seed, int n);

// The sample slot `slot` of a trial with `seed` sends for class `k`.
const TrafficSample& MixSample(const Mix& mix, int k, uint64_t seed, int slot);

// The fewest requests of class k any `n` measured slots hold: floor(n / W) * w_k.
int MixMinClassRequests(const Mix& mix, int k, int n);
// The smallest measured sample giving class k at least `need` requests: ceil(need / w_k) * W.
int MixRequestsNeeded(const Mix& mix, int k, int need);

}  // namespace capq
