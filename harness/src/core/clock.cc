#include "capq/clock.h"

#include <cstdio>
#include <ctime>

namespace capq {

RealtimeAnchor RealtimeAnchor::Take() {
  RealtimeAnchor a;
  a.mono_ns = NowNs();
  a.unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  return a;
}

std::string FormatUtc(int64_t unix_ns) {
  std::time_t secs = static_cast<std::time_t>(unix_ns / 1000000000);
  int ms = static_cast<int>((unix_ns / 1000000) % 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];  // room for any int year, so the format can never truncate
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

std::string UtcNowText(const char* strftime_format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[64];
  return std::strftime(buf, sizeof buf, strftime_format, &tm) > 0 ? buf : "";
}

}  // namespace capq
