// The time base: every timestamp in capq is steady_clock (CLOCK_MONOTONIC) nanoseconds. One
// realtime anchor per trial lines those up with server logs.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace capq {

using MonoNs = int64_t;  // steady_clock nanoseconds since an arbitrary epoch

inline MonoNs NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A pair of readings taken back to back: converts monotonic instants to wall-clock time.
struct RealtimeAnchor {
  MonoNs mono_ns = 0;
  int64_t unix_ns = 0;  // system_clock nanoseconds since the Unix epoch
  static RealtimeAnchor Take();
  int64_t ToUnixNs(MonoNs t) const { return unix_ns + (t - mono_ns); }
};

// "2026-11-29T12:00:00.123Z"
std::string FormatUtc(int64_t unix_ns);
// The wall clock now in UTC through a strftime format: "%Y-%m-%d" gives "2026-11-29".
std::string UtcNowText(const char* strftime_format);

inline double NsToMs(int64_t ns) { return static_cast<double>(ns) / 1e6; }
inline double NsToS(int64_t ns) { return static_cast<double>(ns) / 1e9; }

}  // namespace capq
