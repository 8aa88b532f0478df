// What a stream's decoder knows of its text without holding it: the byte count, whether the bytes
// are well-formed UTF-8 and their SHA-256, each taken piece by piece as the deltas arrive, so that
// thousands of streams in flight hold a few hundred bytes each instead of their whole outputs.
// The results equal IsValidUtf8 and Sha256Hex (decode.h) of the concatenated pieces, however the
// text was cut, a multi-byte character split across two deltas included.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace capq {

// UTF-8 well-formedness of a text that arrives in pieces; a character cut at a piece's end is
// held (at most three bytes) until the next piece completes it.
class Utf8Check {
 public:
  void Append(std::string_view piece);
  bool valid() const { return valid_ && carry_.empty(); }  // of everything appended so far

 private:
  bool valid_ = true;
  std::string carry_;  // the start of a character the last piece cut
};

// SHA-256 over pieces (OpenSSL EVP), the byte count and the UTF-8 check beside it.
class TextDigest {
 public:
  TextDigest();
  ~TextDigest();
  TextDigest(TextDigest&&) noexcept;
  TextDigest& operator=(TextDigest&&) noexcept;

  void Append(std::string_view piece);
  int64_t bytes() const { return bytes_; }
  bool valid_utf8() const { return utf8_.valid(); }
  // Lowercase hex of the SHA-256 of every piece appended; ends the digest (call once).
  std::string FinishSha256Hex();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
  int64_t bytes_ = 0;
  Utf8Check utf8_;
};

}  // namespace capq
