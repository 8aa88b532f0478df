#include "capq/measurement/evidence_log.h"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>

namespace capq {
namespace {

constexpr size_t kFlushInBytes = 1u << 20;  // lines buffered before they are compressed
constexpr int kZstdLevel = 1;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

const char* EvidenceCompressionName(EvidenceCompression c) {
  return c == EvidenceCompression::kZstd ? "zstd" : "none";
}

// ---- Writer -----------------------------------------------------------------------------------

Result<std::unique_ptr<EvidenceWriter>> EvidenceWriter::Create(const std::string& path,
                                                               EvidenceCompression c) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError(Errno("cannot create " + path));
  std::unique_ptr<EvidenceWriter> w(new EvidenceWriter(path, fd, c));
  if (c == EvidenceCompression::kZstd) {
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    if (cctx == nullptr) return Status::Internal("ZSTD_createCCtx failed");
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, kZstdLevel);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    w->cctx_ = cctx;
  }
  return w;
}

EvidenceWriter::EvidenceWriter(std::string path, int fd, EvidenceCompression c)
    : path_(std::move(path)), fd_(fd), compression_(c) {}

EvidenceWriter::~EvidenceWriter() {
  if (fd_ >= 0) ::close(fd_);
  ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_));
}

void EvidenceWriter::Append(std::string_view line) {
  in_.append(line);
  in_.push_back('\n');
  bytes_in_ += static_cast<int64_t>(line.size() + 1);
  if (in_.size() >= kFlushInBytes) {
    if (compression_ == EvidenceCompression::kZstd) {
      Compress(ZSTD_e_continue);
    } else {
      WriteOut(in_.data(), in_.size());
      in_.clear();
    }
  }
}

// Feeds the buffered lines to zstd with `mode` and writes what it produced.
void EvidenceWriter::Compress(int mode) {
  auto* cctx = static_cast<ZSTD_CCtx*>(cctx_);
  ZSTD_inBuffer in{in_.data(), in_.size(), 0};
  const size_t chunk = ZSTD_CStreamOutSize();
  while (true) {
    const size_t used = out_.size();
    out_.resize(used + chunk);
    ZSTD_outBuffer out{out_.data() + used, chunk, 0};
    const size_t left = ZSTD_compressStream2(cctx, &out, &in, static_cast<ZSTD_EndDirective>(mode));
    out_.resize(used + out.pos);
    if (ZSTD_isError(left)) {
      if (error_.ok()) error_ = Status::IoError(path_ + ": zstd: " + ZSTD_getErrorName(left));
      break;
    }
    const bool done = mode == ZSTD_e_continue ? in.pos == in.size : left == 0;
    if (done) break;
  }
  in_.clear();
  WriteOut(out_.data(), out_.size());
  out_.clear();
}

void EvidenceWriter::WriteOut(const char* data, size_t n) {
  while (n > 0 && error_.ok()) {
    const ssize_t k = ::write(fd_, data, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      error_ = Status::IoError(Errno("write " + path_));
      return;
    }
    data += k;
    n -= static_cast<size_t>(k);
    bytes_out_ += k;
  }
}

Status EvidenceWriter::Flush() {
  if (fd_ < 0) return Status::FailedPrecondition(path_ + ": already closed");
  if (compression_ == EvidenceCompression::kZstd) {
    // A whole frame per flush: a file cut after it decodes to its last flushed line, where a
    // damaged tail inside one long frame could hide the blocks before it from the decoder.
    Compress(ZSTD_e_end);
  } else {
    WriteOut(in_.data(), in_.size());
    in_.clear();
  }
  return error_;
}

Status EvidenceWriter::Close() {
  if (fd_ < 0) return error_;
  if (compression_ == EvidenceCompression::kZstd) {
    Compress(ZSTD_e_end);
  } else {
    WriteOut(in_.data(), in_.size());
    in_.clear();
  }
  if (error_.ok() && ::fsync(fd_) != 0) error_ = Status::IoError(Errno("fsync " + path_));
  if (::close(fd_) != 0 && error_.ok()) error_ = Status::IoError(Errno("close " + path_));
  fd_ = -1;
  return error_;
}

// ---- Reader -----------------------------------------------------------------------------------

Result<std::unique_ptr<EvidenceReader>> EvidenceReader::Open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::NotFound(Errno("cannot open " + path));
  unsigned char magic[4] = {0, 0, 0, 0};
  const size_t n = std::fread(magic, 1, 4, f);
  std::rewind(f);
  const bool zstd =
      n == 4 && magic[0] == 0x28 && magic[1] == 0xB5 && magic[2] == 0x2F && magic[3] == 0xFD;
  std::unique_ptr<EvidenceReader> r(
      new EvidenceReader(path, f, zstd ? EvidenceCompression::kZstd : EvidenceCompression::kNone));
  if (zstd) {
    r->dctx_ = ZSTD_createDCtx();
    if (r->dctx_ == nullptr) return Status::Internal("ZSTD_createDCtx failed");
  }
  return r;
}

EvidenceReader::EvidenceReader(std::string path, std::FILE* f, EvidenceCompression c)
    : path_(std::move(path)), f_(f), compression_(c) {}

EvidenceReader::~EvidenceReader() {
  std::fclose(f_);
  ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(dctx_));
}

bool EvidenceReader::Refill() {
  if (buf_pos_ > 0) {
    buf_.erase(0, buf_pos_);
    buf_pos_ = 0;
  }
  const size_t chunk = 1u << 16;
  if (compression_ == EvidenceCompression::kNone) {
    const size_t used = buf_.size();
    buf_.resize(used + chunk);
    const size_t n = std::fread(buf_.data() + used, 1, chunk, f_);
    buf_.resize(used + n);
    return n > 0;
  }
  while (true) {
    if (in_pos_ == in_.size()) {
      in_.resize(chunk);
      in_.resize(std::fread(in_.data(), 1, chunk, f_));
      in_pos_ = 0;
      if (in_.empty()) return false;
    }
    ZSTD_inBuffer in{in_.data(), in_.size(), in_pos_};
    const size_t used = buf_.size();
    buf_.resize(used + ZSTD_DStreamOutSize());
    ZSTD_outBuffer out{buf_.data() + used, ZSTD_DStreamOutSize(), 0};
    const size_t rc = ZSTD_decompressStream(static_cast<ZSTD_DCtx*>(dctx_), &out, &in);
    in_pos_ = in.pos;
    buf_.resize(used + out.pos);
    if (ZSTD_isError(rc)) {
      cut_ = path_ + ": zstd: " + ZSTD_getErrorName(rc);
      in_.clear();
      in_pos_ = 0;
      std::fseek(f_, 0, SEEK_END);
      return out.pos > 0;
    }
    frame_open_ = rc != 0;
    if (out.pos > 0) return true;
  }
}

bool EvidenceReader::Next(std::string* line) {
  while (true) {
    const size_t nl = buf_.find('\n', buf_pos_);
    if (nl != std::string::npos) {
      line->assign(buf_, buf_pos_, nl - buf_pos_);
      buf_pos_ = nl + 1;
      return true;
    }
    if (!Refill()) break;
  }
  if (cut_.empty() && std::ferror(f_)) cut_ = path_ + ": read error";
  if (cut_.empty() && buf_pos_ < buf_.size()) {
    cut_ = path_ + ": ends inside a line (" + std::to_string(buf_.size() - buf_pos_) + " bytes)";
  }
  if (cut_.empty() && frame_open_) cut_ = path_ + ": ends inside a zstd frame";
  return false;
}

}  // namespace capq
