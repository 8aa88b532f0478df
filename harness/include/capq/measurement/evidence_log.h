// Evidence streamed to disk: a JSON-lines file written a line at a time while the load runs, plain
// or zstd-compressed, and read back in one pass.
//
// Durability: Flush() hands every line appended so far to the kernel (for zstd, as a whole zstd
// frame: the file is a sequence of frames, one per flush), so from then on the process dying loses
// none of them; Close() ends the file and
// fsyncs it. A file cut short (the process killed between flushes, or mid-block) reads back up to
// its last whole line, and the reader says it was cut.
//
// Thread safety: none. A writer is used by one thread at a time (the load generator's recorder
// during a load, the trial's thread before and after).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "capq/status.h"

namespace capq {

enum class EvidenceCompression { kNone, kZstd };
const char* EvidenceCompressionName(EvidenceCompression c);  // "none", "zstd"

class EvidenceWriter {
 public:
  // Creates `path` (an existing file is replaced). zstd level 1: the recorder compresses while the
  // load runs, on a machine whose cores also serve the streams.
  static Result<std::unique_ptr<EvidenceWriter>> Create(const std::string& path,
                                                        EvidenceCompression c);
  ~EvidenceWriter();
  EvidenceWriter(const EvidenceWriter&) = delete;
  EvidenceWriter& operator=(const EvidenceWriter&) = delete;

  // Buffers one line; `line` holds no '\n' (one is added). Errors are kept for Flush/Close.
  void Append(std::string_view line);
  Status Flush();
  Status Close();  // ends the zstd frame, fsyncs, closes; nothing may be appended after

  const std::string& path() const { return path_; }
  int64_t bytes_in() const { return bytes_in_; }    // line bytes appended, '\n' included
  int64_t bytes_out() const { return bytes_out_; }  // bytes written to the file

 private:
  EvidenceWriter(std::string path, int fd, EvidenceCompression c);
  void Compress(int mode);  // ZSTD_EndDirective
  void WriteOut(const char* data, size_t n);

  std::string path_;
  int fd_ = -1;
  EvidenceCompression compression_;
  void* cctx_ = nullptr;  // ZSTD_CCtx
  std::string in_, out_;  // lines not yet compressed / bytes not yet written
  int64_t bytes_in_ = 0, bytes_out_ = 0;
  Status error_;
};

class EvidenceReader {
 public:
  // Plain or zstd, told apart by the zstd frame magic at the start of the file.
  static Result<std::unique_ptr<EvidenceReader>> Open(const std::string& path);
  ~EvidenceReader();
  EvidenceReader(const EvidenceReader&) = delete;
  EvidenceReader& operator=(const EvidenceReader&) = delete;

  // The next whole line, without its '\n'; false at the end of the readable lines.
  bool Next(std::string* line);
  // After Next() returned false: the file ended inside a line or a compressed frame ("" = it ended
  // cleanly), or could not be read.
  const std::string& cut() const { return cut_; }
  EvidenceCompression compression() const { return compression_; }

 private:
  EvidenceReader(std::string path, std::FILE* f, EvidenceCompression c);
  bool Refill();  // more decoded bytes into buf_; false at the end of the file

  std::string path_;
  std::FILE* f_;
  EvidenceCompression compression_;
  void* dctx_ = nullptr;  // ZSTD_DCtx
  std::string in_, buf_;
  size_t in_pos_ = 0, buf_pos_ = 0;
  bool frame_open_ = false;  // zstd: inside a frame not yet ended
  std::string cut_;
};

}  // namespace capq
