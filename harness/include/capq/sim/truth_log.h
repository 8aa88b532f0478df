// The simulated server's truth log: one JSON line per chunk (frame) it writes, with the engine's
// virtual time for it and the server's own monotonic clock read right before the write:
//   {"request_id":"chatcmpl-...","event_index":3,"virtual_ns":123,"wall_mono_ns":456,"due_mono_ns":450}
// due_mono_ns is where the engine schedule puts that virtual instant on the wall clock
// (t0 + virtual / time_scale), so wall_mono_ns - due_mono_ns is the write's lateness.
// Lines are buffered in memory and written in large blocks; Close() writes the rest.
// Not thread-safe: the server's loop thread owns it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "capq/status.h"

namespace capq::sim {

class TruthLog {
 public:
  TruthLog() = default;
  ~TruthLog();
  TruthLog(const TruthLog&) = delete;
  TruthLog& operator=(const TruthLog&) = delete;

  Status Open(const std::string& path);  // truncates
  bool is_open() const { return file_ != nullptr; }
  void Append(std::string_view request_id, int64_t event_index, int64_t virtual_ns,
              int64_t wall_mono_ns, int64_t due_mono_ns);
  Status Close();  // flushes; idempotent

 private:
  Status FlushBuffer();
  std::FILE* file_ = nullptr;
  std::string buffer_;
  std::string path_;
  Status first_error_;
};

}  // namespace capq::sim
