// The gzip content coding (RFC 1952, through zlib) of one streamed body, for the simulator's gzip
// fault. Private to the simulator.
//
// Each piece is compressed and sync-flushed on its own (Z_SYNC_FLUSH ends it on a byte boundary),
// so a client that inflates what it reads gets every SSE event as soon as its bytes arrive: a
// compressor that waited for its block to fill would hold events back, and capq would measure
// the compressor instead of the server.
//
// Thread safety: none; one per stream, used by the server's loop thread.
#pragma once

#include <zlib.h>

#include <memory>
#include <string>
#include <string_view>

namespace capq::sim::internal {

class GzipStream {
 public:
  GzipStream();
  ~GzipStream();
  GzipStream(const GzipStream&) = delete;
  GzipStream& operator=(const GzipStream&) = delete;

  // False when zlib could not set up its state (out of memory); nothing is compressed then.
  bool ok() const { return ok_; }

  // Appends `bytes` compressed and flushed to *out; the first call also writes the gzip header.
  // REQUIRES: ok(), Finish() not called yet.
  void Flush(std::string_view bytes, std::string* out);
  // Appends the last (empty) block and the trailer (CRC-32 and length of everything flushed).
  // REQUIRES: ok(); call it once, after the last Flush().
  void Finish(std::string* out);

 private:
  void Deflate(std::string_view bytes, int flush, std::string* out);

  // On the heap: zlib's internal state points back at its z_stream, so it must never move.
  std::unique_ptr<z_stream> z_;
  bool ok_ = false;
};

}  // namespace capq::sim::internal
