// Open-loop arrival schedules: when each request of a trial is meant to be sent.
//
// A schedule is a list of intended send offsets in the server's (virtual) nanoseconds from the
// schedule's start, one per request, non-decreasing. The gaps between requests are
//   constant: exactly 1 / rate; the first request is sent at 0 (offset i is round(i / rate));
//   poisson:  exponential with mean 1 / rate (cv 1);
//   gamma:    gamma with shape 1 / cv^2 and mean 1 / rate (so the gaps' cv is the declared one).
// For poisson and gamma the first request is sent one drawn gap after the start (offset i is the
// sum of gaps 0..i), as a renewal process observed from time 0; each gap is rounded to a whole
// nanosecond before it is added, so offsets are exact integer sums.
//
// Deterministic in (kind, rate, cv, count, seed) on every platform: the draws come from our own
// xoshiro256** generator (seeded through splitmix64), exponential gaps are -log(u), gamma gaps
// Marsaglia-Tsang with normals by the polar method; no std:: distribution is used, since their
// output differs between standard libraries. Only std::log, std::exp and std::sqrt touch the
// draws. A longer schedule extends a shorter one of the same arguments: offsets of
// ArrivalOffsetsNs(..., n, seed) are a prefix of ArrivalOffsetsNs(..., m, seed) for n <= m, and
// ArrivalOffsetsForDurationNs is the prefix of that sequence below the duration.
//
// Pure: no I/O, no clocks.
#pragma once

#include <cstdint>
#include <vector>

#include "capq/model/row.h"

namespace capq {

// The first `count` intended send offsets of the schedule. Empty when kind is closed_loop, rate_rps
// is not a finite number > 0, count <= 0, or kind is gamma with cv not a finite number > 0. cv is
// read for gamma only (constant gaps have cv 0 and poisson gaps cv 1 by definition).
std::vector<int64_t> ArrivalOffsetsNs(ArrivalKind kind, double rate_rps, double cv, int64_t count,
                                      uint64_t seed);

// The offsets of the same schedule inside [0, duration_s): generated until an offset reaches
// round(duration_s * 1e9) ns, which is not included. Empty for the arguments above, or when
// duration_s is not a finite number > 0.
std::vector<int64_t> ArrivalOffsetsForDurationNs(ArrivalKind kind, double rate_rps, double cv,
                                                 double duration_s, uint64_t seed);

}  // namespace capq
