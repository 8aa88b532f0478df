#include "gzip_stream.h"

namespace capq::sim::internal {
namespace {

// Window bits + 16 asks for a gzip header and trailer instead of zlib's. A 4 KiB window (12 bits)
// still spans several chunks of one stream, and with memLevel 5 a stream's state is ~32 KiB, not
// zlib's default ~256 KiB: the fault may apply to every one of thousands of open streams.
constexpr int kWindowBits = 12 + 16;
constexpr int kMemLevel = 5;

}  // namespace

GzipStream::GzipStream() : z_(std::make_unique<z_stream>()) {
  ok_ = deflateInit2(z_.get(), Z_DEFAULT_COMPRESSION, Z_DEFLATED, kWindowBits, kMemLevel,
                     Z_DEFAULT_STRATEGY) == Z_OK;
}

GzipStream::~GzipStream() {
  if (ok_) deflateEnd(z_.get());
}

void GzipStream::Flush(std::string_view bytes, std::string* out) {
  Deflate(bytes, Z_SYNC_FLUSH, out);
}

void GzipStream::Finish(std::string* out) { Deflate({}, Z_FINISH, out); }

void GzipStream::Deflate(std::string_view bytes, int flush, std::string* out) {
  if (!ok_) return;
  z_->next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z_->avail_in = static_cast<uInt>(bytes.size());
  // zlib asks to be called again with the same flush value for as long as it fills the output.
  do {
    const size_t at = out->size();
    const size_t room = 1024 + bytes.size();
    out->resize(at + room);
    z_->next_out = reinterpret_cast<Bytef*>(out->data() + at);
    z_->avail_out = static_cast<uInt>(room);
    deflate(z_.get(), flush);
    out->resize(out->size() - z_->avail_out);
  } while (z_->avail_out == 0);
}

}  // namespace capq::sim::internal
