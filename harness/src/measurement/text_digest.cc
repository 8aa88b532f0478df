#include "capq/measurement/text_digest.h"

#include <openssl/evp.h>

#include <algorithm>

#include "capq/measurement/decode.h"

namespace capq {
namespace {

// The length of the character a lead byte starts; 0 for a byte no character starts with.
size_t LeadLength(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 0;
}

// Bytes at the end of `s` that start a character the piece cuts short (0 when none is cut).
size_t CutTail(std::string_view s) {
  for (size_t back = 1; back <= std::min<size_t>(3, s.size()); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: its lead is further back
    return LeadLength(c) > back ? back : 0;
  }
  return 0;
}

}  // namespace

void Utf8Check::Append(std::string_view piece) {
  if (!valid_) return;
  if (!carry_.empty()) {
    const size_t want = LeadLength(static_cast<unsigned char>(carry_[0]));
    const size_t take = std::min(want - carry_.size(), piece.size());
    carry_.append(piece.substr(0, take));
    piece.remove_prefix(take);
    if (carry_.size() < want) return;  // still cut: the next piece may complete it
    valid_ = IsValidUtf8(carry_);
    carry_.clear();
    if (!valid_) return;
  }
  const size_t tail = CutTail(piece);
  valid_ = IsValidUtf8(piece.substr(0, piece.size() - tail));
  if (valid_) carry_.assign(piece.substr(piece.size() - tail));
}

struct TextDigest::Ctx {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  bool ok = md != nullptr && EVP_DigestInit_ex(md, EVP_sha256(), nullptr) == 1;
  ~Ctx() { EVP_MD_CTX_free(md); }
};

TextDigest::TextDigest() : ctx_(std::make_unique<Ctx>()) {}
TextDigest::~TextDigest() = default;
TextDigest::TextDigest(TextDigest&&) noexcept = default;
TextDigest& TextDigest::operator=(TextDigest&&) noexcept = default;

void TextDigest::Append(std::string_view piece) {
  bytes_ += static_cast<int64_t>(piece.size());
  utf8_.Append(piece);
  if (ctx_->ok) ctx_->ok = EVP_DigestUpdate(ctx_->md, piece.data(), piece.size()) == 1;
}

std::string TextDigest::FinishSha256Hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // As Sha256Hex: "" when OpenSSL failed.
  if (!ctx_->ok || EVP_DigestFinal_ex(ctx_->md, md, &len) != 1) return "";
  ctx_->ok = false;
  return LowerHex(std::string_view(reinterpret_cast<const char*>(md), len));
}

}  // namespace capq
