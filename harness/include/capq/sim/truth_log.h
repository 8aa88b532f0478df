// The simulated server's truth log: one JSON line per chunk (frame) it writes, with the engine's
// virtual time for it and the server's own monotonic clock read right before the write:
//   {"request_id":"chatcmpl-...","event_index":3,"virtual_ns":123,"wall_mono_ns":456,"due_mono_ns":450,
//    "written_mono_ns":470}
// due_mono_ns is where the engine schedule puts that virtual instant on the wall clock
// (t0 + virtual / time_scale), so wall_mono_ns - due_mono_ns is the hand-over's lateness.
// written_mono_ns: right after the write(2) that put the frame's last byte into the kernel (the
// wire, as far as a process can see it); 0 where the server does not track it (error replies and
// faults answered through evhttp's own calls). The server writes a frame when it hands it over, so
// written - wall is that write(2) alone, unless the socket took only part and libevent wrote the
// rest on a later turn.
// The loop thread only copies each record into a block (no formatting, no allocation once both
// blocks have grown); a writer thread formats full blocks as JSON lines and writes them, so the
// loop never blocks on the file. The two blocks trade places and keep their memory.
// Close() writes the rest and joins the writer.
// Append/Close are called by one thread (the server's loop thread, then Stop()).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

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
              int64_t wall_mono_ns, int64_t due_mono_ns, int64_t written_mono_ns = 0);
  Status Close();  // flushes; idempotent

 private:
  struct Record {
    size_t id_begin;  // request id: ids[id_begin, id_begin + id_size)
    size_t id_size;
    int64_t event_index, virtual_ns, wall_mono_ns, due_mono_ns, written_mono_ns;
  };
  struct Block {
    std::vector<Record> records;
    std::string ids;
    void Clear() {  // keeps the memory
      records.clear();
      ids.clear();
    }
  };

  void WriterLoop();
  // Formats and writes `block` (writer thread, or Close after the join).
  Status Write(const Block& block, std::string* text);

  std::FILE* file_ = nullptr;
  std::string path_;
  Block active_;  // the appending thread's block
  std::thread writer_;
  std::mutex mu_;
  std::condition_variable cv_;
  // pending_ belongs to the writer while pending_full_; otherwise it is an empty block the
  // appending thread may trade for its full one.
  Block pending_;
  bool pending_full_ = false;  // GUARDED_BY(mu_)
  bool closing_ = false;       // GUARDED_BY(mu_)
  Status first_error_;         // GUARDED_BY(mu_)
};

}  // namespace capq::sim
