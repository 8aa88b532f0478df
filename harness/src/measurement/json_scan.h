// A strict JSON scanner for the two texts read once per streamed event after a load: the raw
// evidence's event lines and the servers' chunks in them. A generic parse builds a tree of maps
// and strings for every event, twice (the line, then its data): at a million events that was
// almost all of a trial's read-back. The scanner reads in place instead, and decodes a string only
// when it has escapes.
//
// It accepts a subset of what nlohmann::json::parse accepts and reads that subset the same way
// (escapes and surrogate pairs, UTF-8 checked as nlohmann's lexer checks it, no raw control
// characters, the number grammar). Where it is unsure it gives up (false), and the caller parses
// the text generically: a number with an exponent (nlohmann refuses one that overflows a double),
// a byte-order mark, nesting deeper than kMaxDepth. Giving up is never an error in itself.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace capq::internal {

class JsonScan {
 public:
  static constexpr int kMaxDepth = 64;

  explicit JsonScan(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  // Whitespace as JSON has it: space, tab, LF, CR.
  void SkipSpace() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  // The next byte is `c` (no whitespace skipped); consumes it.
  bool Eat(char c) {
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }
  // The exact bytes `s` come next; consumes them.
  bool EatLiteral(std::string_view s);
  // The next byte, or '\0' at the end.
  char Peek() const { return p_ < end_ ? *p_ : '\0'; }
  bool AtEnd() const { return p_ == end_; }

  // A string: *out views the text when it has no escapes, else `scratch` holding it decoded.
  // With scratch == nullptr the string is only checked (*out is then left unset).
  bool String(std::string_view* out, std::string* scratch);
  // A string into *out (decoded, or copied when it has no escapes).
  bool StringInto(std::string* out);
  // A plain integer that fits: -?(0|[1-9][0-9]{0,17}), not followed by a fraction or exponent.
  bool Int(int64_t* v);
  // The literal null.
  bool Null() { return EatLiteral("null"); }
  // Any value, checked and passed over.
  bool Skip(int depth = 0);

 private:
  bool Number();
  bool Hex4(uint32_t* cp);
  bool Escape(char** dst);
  bool Special(unsigned char c, char** dst);

  const char* p_;
  const char* end_;
};

}  // namespace capq::internal
