// The load level: the one number a qualification searches over, and what it stands for.
#pragma once

#include <string>

namespace capq {

// A load level is the concurrency C of a closed-loop row (concurrent requests, or concurrent
// sessions on a session row), or on an open-loop row the rate in steps: level L stands for
// L * workload.arrival.rate_step_rps requests per second. It is never the connection pool
// (LoadSpec::connections) nor a warm-up's concurrency. Levels are ordered and step by one: the
// boundary is a level that passes and the level above it that fails.
using LoadLevel = int;

// How a row's load levels read wherever one is shown (summary lines, progress, capacity data,
// report, test names and messages): a closed-loop level is the concurrency C ("C=6"), a rate row's
// level L the rate L * rate_step_rps ("R=1.25 rps"), written with as many decimals as the step
// needs (0.25 -> 2, 0.5 -> 1, 2 -> 0, at most 6), so every rate of one row reads alike and exactly.
struct LoadScale {
  bool open_loop = false;
  double rate_step_rps = 0;

  double Rate(LoadLevel level) const;  // level * rate_step_rps; 0 on a closed-loop row
  // Rate(level) to Decimals(), as Figure() writes it: 3 steps of 0.1 are 0.3 (a multiple of the
  // step to the loader's tolerance), not 0.30000000000000004.
  double RoundedRate(LoadLevel level) const;
  int Decimals() const;                       // of a rate figure; 0 on a closed-loop row
  std::string Figure(LoadLevel level) const;  // "6" | "1.25"
  std::string Value(LoadLevel level) const;   // "6" | "1.25 rps"
  std::string Label(LoadLevel level) const;   // "C=6" | "R=1.25 rps"
  std::string Symbol() const;                 // "C" | "R"
  std::string Max() const;                    // "Cmax" | "Rmax"
  // "c6" | "r1p25": the level in names that allow only [a-z0-9_] (test names, trial folders).
  std::string Slug(LoadLevel level) const;
};
}  // namespace capq
