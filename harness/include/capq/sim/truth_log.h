// The simulated server's truth log: one JSON line per chunk (frame) it writes, with the engine's
// virtual time for it and the server's own monotonic clock read right before the write:
//   {"request_id":"chatcmpl-...","event_index":3,"virtual_ns":123,"wall_mono_ns":456,"due_mono_ns":450}
// due_mono_ns is where the engine schedule puts that virtual instant on the wall clock
// (t0 + virtual / time_scale), so wall_mono_ns - due_mono_ns is the write's lateness.
// Lines are buffered in memory; full blocks are handed to a writer thread so the loop never blocks
// on the file; Close() writes the rest and joins it.
// Append/Close are called by one thread (the server's loop thread, then Stop()).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

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
  void WriterLoop();
  Status Write(const std::string& block);  // writer thread (or Close after the join)

  std::FILE* file_ = nullptr;
  std::string buffer_;  // the appending thread's block
  std::string path_;
  std::thread writer_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;   // GUARDED_BY(mu_): a full block waiting for the writer
  bool closing_ = false;  // GUARDED_BY(mu_)
  Status first_error_;    // GUARDED_BY(mu_)
};

}  // namespace capq::sim
