#include "json_scan.h"

#include <array>
#include <bit>
#include <cstddef>
#include <cstring>

namespace capq::internal {
namespace {

bool Cont(unsigned char c, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
  return c >= lo && c <= hi;
}

// The length of the well-formed UTF-8 sequence at p (RFC 3629's table, as nlohmann's lexer has
// it: no overlongs, no surrogates, nothing past U+10FFFF), or 0.
size_t Utf8Sequence(const unsigned char* p, const unsigned char* end) {
  const unsigned char c = p[0];
  const size_t room = static_cast<size_t>(end - p);
  if (c >= 0xC2 && c <= 0xDF) return room >= 2 && Cont(p[1]) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (room < 3) return 0;
    const unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    return Cont(p[1], lo, hi) && Cont(p[2]) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (room < 4) return 0;
    const unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    return Cont(p[1], lo, hi) && Cont(p[2]) && Cont(p[3]) ? 4 : 0;
  }
  return 0;
}

// Writes `cp` as UTF-8 at dst; returns the end. At most as many bytes as its escape took.
char* PutUtf8(char* dst, uint32_t cp) {
  if (cp < 0x80) {
    *dst++ = static_cast<char>(cp);
  } else if (cp < 0x800) {
    *dst++ = static_cast<char>(0xC0 | (cp >> 6));
    *dst++ = static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *dst++ = static_cast<char>(0xE0 | (cp >> 12));
    *dst++ = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *dst++ = static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *dst++ = static_cast<char>(0xF0 | (cp >> 18));
    *dst++ = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *dst++ = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *dst++ = static_cast<char>(0x80 | (cp & 0x3F));
  }
  return dst;
}

// The bytes a string's plain run stops at: its end, an escape, a control character, non-ASCII.
constexpr auto kSpecial = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = true;
  for (int c = 0x80; c < 0x100; ++c) t[c] = true;
  t['"'] = t['\\'] = true;
  return t;
}();

// The bytes of w that kSpecial names, each flagged by its high bit (a byte is zero in x when
// (x - 0x01..) & ~x & 0x80.. flags it). The flag of the first such byte in memory is exact on a
// little-endian machine, where borrows run toward later bytes; one after it may be false.
uint64_t SpecialBytes(uint64_t w) {
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  const auto zero = [](uint64_t x) { return (x - kOnes) & ~x & kHigh; };
  return (zero(w ^ (kOnes * '"')) | zero(w ^ (kOnes * '\\')) | (w - kOnes * 0x20) | w) & kHigh;
}

// How many bytes from p on (before end) are plain, 8 at a time where it can.
size_t PlainRun(const char* p, const char* end) {
  size_t n = 0;
  if constexpr (std::endian::native == std::endian::little) {
    while (end - p - static_cast<ptrdiff_t>(n) >= 8) {
      uint64_t w;
      std::memcpy(&w, p + n, 8);
      if (const uint64_t m = SpecialBytes(w); m != 0) return n + std::countr_zero(m) / 8;
      n += 8;
    }
  }
  while (p + n < end && !kSpecial[static_cast<unsigned char>(p[n])]) ++n;
  return n;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

bool JsonScan::EatLiteral(std::string_view s) {
  if (static_cast<size_t>(end_ - p_) < s.size() || std::string_view(p_, s.size()) != s) {
    return false;
  }
  p_ += s.size();
  return true;
}

bool JsonScan::Hex4(uint32_t* cp) {
  if (end_ - p_ < 4) return false;
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    const char c = *p_++;
    v <<= 4;
    if (c >= '0' && c <= '9') {
      v |= static_cast<uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      v |= static_cast<uint32_t>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      v |= static_cast<uint32_t>(c - 'A' + 10);
    } else {
      return false;
    }
  }
  *cp = v;
  return true;
}

bool JsonScan::String(std::string_view* out, std::string* scratch) {
  if (!Eat('"')) return false;
  const char* const start = p_;
  // Read in place until an escape that must be decoded.
  while (true) {
    p_ += PlainRun(p_, end_);
    if (p_ == end_) return false;
    const auto c = static_cast<unsigned char>(*p_);
    if (c == '"') {
      if (scratch != nullptr) *out = std::string_view(start, static_cast<size_t>(p_ - start));
      ++p_;
      return true;
    }
    if (c == '\\') {
      if (scratch != nullptr) break;
      if (!Escape(nullptr)) return false;
    } else if (!Special(c, nullptr)) {
      return false;
    }
  }
  // Decoded into scratch: never more bytes than the text has left, and 8 more of room for the
  // copy 8 bytes at a time.
  const size_t room = static_cast<size_t>(end_ - start) + 8;
  if (scratch->size() < room) scratch->resize(room);
  char* const base = scratch->data();
  std::memcpy(base, start, static_cast<size_t>(p_ - start));
  char* dst = base + (p_ - start);
  while (true) {
    if constexpr (std::endian::native == std::endian::little) {
      while (end_ - p_ >= 8) {
        uint64_t w;
        std::memcpy(&w, p_, 8);
        std::memcpy(dst, &w, 8);  // the bytes past the first special one are overwritten
        const uint64_t m = SpecialBytes(w);
        const size_t plain = m == 0 ? 8 : static_cast<size_t>(std::countr_zero(m)) / 8;
        p_ += plain;
        dst += plain;
        if (plain < 8) break;
      }
    }
    while (p_ < end_ && !kSpecial[static_cast<unsigned char>(*p_)]) *dst++ = *p_++;
    if (p_ == end_) return false;
    const auto c = static_cast<unsigned char>(*p_);
    if (c == '"') {
      scratch->resize(static_cast<size_t>(dst - base));
      *out = *scratch;
      ++p_;
      return true;
    }
    if (c == '\\' ? !Escape(&dst) : !Special(c, &dst)) return false;
  }
}

// A non-ASCII character (copied to *dst when dst != nullptr), or false for a control character.
bool JsonScan::Special(unsigned char c, char** dst) {
  if (c < 0x80) return false;  // a raw control character
  const size_t n = Utf8Sequence(reinterpret_cast<const unsigned char*>(p_),
                                reinterpret_cast<const unsigned char*>(end_));
  if (n == 0) return false;
  if (dst != nullptr) {
    std::memcpy(*dst, p_, n);
    *dst += n;
  }
  p_ += n;
  return true;
}

// The escape at p_ (its backslash), decoded to *dst when dst != nullptr.
bool JsonScan::Escape(char** dst) {
  ++p_;
  if (p_ == end_) return false;
  char plain = '\0';
  switch (*p_++) {
    case '"':
      plain = '"';
      break;
    case '\\':
      plain = '\\';
      break;
    case '/':
      plain = '/';
      break;
    case 'b':
      plain = '\b';
      break;
    case 'f':
      plain = '\f';
      break;
    case 'n':
      plain = '\n';
      break;
    case 'r':
      plain = '\r';
      break;
    case 't':
      plain = '\t';
      break;
    case 'u': {
      uint32_t cp = 0;
      if (!Hex4(&cp)) return false;
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        // A high surrogate must be followed by an escaped low one (nlohmann refuses otherwise).
        uint32_t low = 0;
        if (!EatLiteral("\\u") || !Hex4(&low) || low < 0xDC00 || low > 0xDFFF) return false;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
      } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
        return false;
      }
      if (dst != nullptr) *dst = PutUtf8(*dst, cp);
      return true;
    }
    default:
      return false;
  }
  if (dst != nullptr) *(*dst)++ = plain;
  return true;
}

bool JsonScan::StringInto(std::string* out) {
  std::string_view v;
  if (!String(&v, out)) return false;
  if (v.data() != out->data()) out->assign(v);
  return true;
}

bool JsonScan::Int(int64_t* v) {
  const char* p = p_;
  const bool negative = p < end_ && *p == '-';
  if (negative) ++p;
  const char* const digits = p;
  while (p < end_ && IsDigit(*p)) ++p;
  const size_t n = static_cast<size_t>(p - digits);
  if (n == 0 || n > 18 || (n > 1 && *digits == '0')) return false;
  if (p < end_ && (*p == '.' || *p == 'e' || *p == 'E')) return false;
  int64_t x = 0;
  for (const char* d = digits; d < p; ++d) x = x * 10 + (*d - '0');
  *v = negative ? -x : x;
  p_ = p;
  return true;
}

// -?(0|[1-9][0-9]*)(\.[0-9]+)?, at most 300 digits before the point so that its value is finite
// (nlohmann refuses a number that overflows a double); an exponent gives up.
bool JsonScan::Number() {
  Eat('-');
  const char* const digits = p_;
  while (p_ < end_ && IsDigit(*p_)) ++p_;
  const size_t n = static_cast<size_t>(p_ - digits);
  if (n == 0 || n > 300 || (n > 1 && *digits == '0')) return false;
  if (Eat('.')) {
    const char* const fraction = p_;
    while (p_ < end_ && IsDigit(*p_)) ++p_;
    if (p_ == fraction) return false;
  }
  return Peek() != 'e' && Peek() != 'E';
}

bool JsonScan::Skip(int depth) {
  if (depth > kMaxDepth) return false;
  switch (Peek()) {
    case '"': {
      std::string_view unused;
      return String(&unused, nullptr);
    }
    case '{':
      ++p_;
      SkipSpace();
      if (Eat('}')) return true;
      while (true) {
        std::string_view unused;
        if (!String(&unused, nullptr)) return false;
        SkipSpace();
        if (!Eat(':')) return false;
        SkipSpace();
        if (!Skip(depth + 1)) return false;
        SkipSpace();
        if (Eat('}')) return true;
        if (!Eat(',')) return false;
        SkipSpace();
      }
    case '[':
      ++p_;
      SkipSpace();
      if (Eat(']')) return true;
      while (true) {
        if (!Skip(depth + 1)) return false;
        SkipSpace();
        if (Eat(']')) return true;
        if (!Eat(',')) return false;
        SkipSpace();
      }
    case 't':
      return EatLiteral("true");
    case 'f':
      return EatLiteral("false");
    case 'n':
      return EatLiteral("null");
    default:
      return (Peek() == '-' || IsDigit(Peek())) && Number();
  }
}

}  // namespace capq::internal
