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

#include "capq/model/reuse_tolerance.h"
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

// A trace replayed with its prefix blocks (mix.prefix_blocks; prefix_blocks.h): every measured
// prompt is built from its sample's chained block ids, so requests that share leading ids share
// exactly those blocks' tokens, and each declares the cached tokens its leading blocks already sent
// in the trial would give. `block_tokens` is the trace's block size fitted like its lengths.
struct PrefixBlocks {
  int64_t block_tokens = 0;
  ReuseTolerance tolerance;
};

struct Mix {
  std::string traffic;  // absolute path of the traffic file
  std::vector<MixClass> classes;
  LengthFit lengths;
  std::optional<PrefixBlocks> blocks;
  // A replay (workload.arrival.kind: replay; OrderReplay): every sample in file order as (class,
  // index in that class's samples). Its classes have no shares: the trace's own hold.
  std::vector<std::pair<int, int>> order;
  bool replay() const { return !order.empty(); }
  int Period() const;  // W
};

// Puts each sample in its class; an error names the first class left without samples.
Status AssignTraffic(const std::vector<TrafficSample>& samples, Mix* mix);

// Fits every class's samples (after AssignTraffic) and counts what changed; an error names the
// traffic file's line of the first sample that does not fit the context, with its numbers. With
// prefix blocks every sample must carry them, blocks of one size that scales to whole tokens: each
// block is scaled, the last (partial) one to at least a token, and a cap cuts whole blocks and
// shortens the last one kept.
Status FitTraffic(Mix* mix);

// Makes `mix` a replay of its traffic file in file order, each class's share its count of
// samples (what the report shows). Every one of the file's `samples` must be in a class and carry
// an arrival offset, the offsets never decreasing and spanning some time; an error names the line
// at fault.
Status OrderReplay(Mix* mix, size_t samples);
// Replayed request k: the trace's sample k mod n, cycling; its class in `cls`.
const TrafficSample& ReplaySample(const Mix& mix, int64_t k, int* cls);
// When replayed request k arrived in the trace, in seconds from its first request; past the end
// the trace starts again, each cycle one span and one mean gap after the one before.
double ReplayTraceSeconds(const Mix& mix, int64_t k);
// When replayed request k is sent, in ns from the replay's start, at `speed` times the trace's.
int64_t ReplayOffsetNs(const Mix& mix, double speed, int64_t k);
// How many replayed requests are sent before `ramp_ns` at `speed`: a trial's ramp.
int64_t ReplayRampRequests(const Mix& mix, double speed, int64_t ramp_ns);
// The speed at which the requests one trial replays (those of the first `ramp_s` seconds, then
// `requests` more) arrive at a mean of `rate_rps`: what the trial sends, not the whole trace,
// has the level's rate. The ramp's length depends on the speed, so the two are solved together
// (a few rounds; deterministic).
double ReplaySpeed(const Mix& mix, double rate_rps, double ramp_s, int64_t requests);
// The fewest requests of class k among any `n` consecutive replayed requests.
int ReplayMinClassRequests(const Mix& mix, int k, int n);

// The class index of each of `n` slots of a trial with `seed`.
std::vector<int> MixSequence(const Mix& mix, uint64_t seed, int n);

// The sample slot `slot` of a trial with `seed` sends for class `k`.
const TrafficSample& MixSample(const Mix& mix, int k, uint64_t seed, int slot);

// The fewest requests of class k any `n` measured slots hold: floor(n / W) * w_k.
int MixMinClassRequests(const Mix& mix, int k, int n);
// The smallest measured sample giving class k at least `need` requests: ceil(need / w_k) * W.
int MixRequestsNeeded(const Mix& mix, int k, int need);

}  // namespace capq
