// How far the cached prompt tokens a server serves may stray from what a reuse row declares (a
// prefix row, a session row, or a trace replayed with its prefix blocks).
#pragma once

#include <cstdint>

namespace capq {

struct ReuseTolerance {
  // Per request: served within [declared - tokens, declared + the cold template allowance + tokens]
  // (block-granular caches round down, and the template's own shared tokens come on top).
  int64_t tokens = 16;
  // Per trial: the served hit ratio (cached / prompt tokens) within this many percentage points of
  // the declared one.
  double ratio_pct = 2;
  // Per trial: the share of measured requests, in percent, that may be served fewer cached
  // tokens than declared (a miss) on an engine whose cache model does not explain them.
  double misses_pct = 0;
};

}  // namespace capq
