#include "chunk_scan.h"

#include "json_scan.h"

namespace capq::internal {
namespace {

// One pass over a chunk. Each field the decoder reads may appear once: nlohmann keeps the last of
// a repeated key, and a chunk that repeats one is left to it.
class ChunkReader {
 public:
  ChunkReader(std::string_view data, ChunkScratch* scratch, ChunkFacts* facts)
      : scan_(data), s_(*scratch), f_(*facts) {}

  bool Read() {
    scan_.SkipSpace();
    if (scan_.Peek() != '{' || !Object([this](std::string_view key) { return Root(key); })) {
      return false;
    }
    scan_.SkipSpace();
    return scan_.AtEnd();
  }

 private:
  // An object, `on_key` reading each member's value with the scanner at it.
  template <typename OnKey>
  bool Object(OnKey&& on_key) {
    if (!scan_.Eat('{')) return false;
    scan_.SkipSpace();
    if (scan_.Eat('}')) return true;
    while (true) {
      std::string_view key;
      if (!scan_.String(&key, &s_.key)) return false;
      scan_.SkipSpace();
      if (!scan_.Eat(':')) return false;
      scan_.SkipSpace();
      if (!on_key(key)) return false;
      scan_.SkipSpace();
      if (scan_.Eat('}')) return true;
      if (!scan_.Eat(',')) return false;
      scan_.SkipSpace();
    }
  }

  // False when the bit was already set: a field the decoder reads, repeated.
  static bool Once(unsigned* seen, unsigned bit) {
    if (*seen & bit) return false;
    *seen |= bit;
    return true;
  }

  // null, or a string into *out.
  bool OptString(std::string_view* out, std::string* scratch) {
    if (scan_.Peek() == 'n') return scan_.Null();
    return scan_.Peek() == '"' && scan_.String(out, scratch);
  }

  // null, or a plain integer into *out.
  bool OptInt(std::optional<int64_t>* out) {
    if (scan_.Peek() == 'n') return scan_.Null();
    int64_t v = 0;
    if (!scan_.Int(&v)) return false;
    *out = v;
    return true;
  }

  // null, or an object read by `on_key`.
  template <typename OnKey>
  bool OptObject(OnKey&& on_key) {
    if (scan_.Peek() == 'n') return scan_.Null();
    return scan_.Peek() == '{' && Object(on_key);
  }

  bool Root(std::string_view key) {
    if (key == "error") return false;  // an error frame, worded by the generic reading
    if (key == "model") return Once(&root_, 1) && OptString(&f_.model, &s_.model);
    if (key == "choices") return Once(&root_, 2) && Choices();
    if (key == "usage") {
      if (!Once(&root_, 4)) return false;
      f_.usage = scan_.Peek() == '{';
      return OptObject([this](std::string_view k) { return Usage(k); });
    }
    if (key == "timings") {
      return Once(&root_, 8) && OptObject([this](std::string_view k) { return Timings(k); });
    }
    return scan_.Skip(1);
  }

  // null, [] or [one choice object].
  bool Choices() {
    if (scan_.Peek() == 'n') return scan_.Null();
    if (!scan_.Eat('[')) return false;
    scan_.SkipSpace();
    if (scan_.Eat(']')) return true;
    if (scan_.Peek() != '{' || !Object([this](std::string_view k) { return Choice(k); })) {
      return false;
    }
    scan_.SkipSpace();
    return scan_.Eat(']');  // a second choice is an error the generic reading words
  }

  bool Choice(std::string_view key) {
    if (key == "index") {
      std::optional<int64_t> index;
      return Once(&choice_, 1) && OptInt(&index) && index.value_or(0) == 0;
    }
    if (key == "delta") {
      return Once(&choice_, 2) && OptObject([this](std::string_view k) { return Delta(k); });
    }
    if (key == "finish_reason") {
      if (!Once(&choice_, 4)) return false;
      std::string_view v;
      const bool is_string = scan_.Peek() == '"';
      if (!OptString(&v, &s_.finish_reason)) return false;
      if (is_string) f_.finish_reason = v;
      return true;
    }
    return scan_.Skip(2);
  }

  bool Delta(std::string_view key) {
    static constexpr std::string_view kTexts[3] = {"reasoning_content", "reasoning", "content"};
    for (unsigned i = 0; i < 3; ++i) {
      if (key == kTexts[i]) return Once(&delta_, 1u << i) && OptString(&f_.texts[i], &s_.texts[i]);
    }
    return scan_.Skip(3);
  }

  bool Usage(std::string_view key) {
    if (key == "prompt_tokens") return Once(&usage_, 1) && OptInt(&f_.prompt_tokens);
    if (key == "completion_tokens") return Once(&usage_, 2) && OptInt(&f_.completion_tokens);
    if (key == "prompt_tokens_details") {
      return Once(&usage_, 4) && OptObject([this](std::string_view k) {
               if (k == "cached_tokens") return Once(&details_, 1) && OptInt(&f_.cached_tokens);
               return scan_.Skip(3);
             });
    }
    return scan_.Skip(2);
  }

  bool Timings(std::string_view key) {
    if (key == "cache_n") return Once(&timings_, 1) && OptInt(&f_.cache_n);
    return scan_.Skip(2);
  }

  JsonScan scan_;
  ChunkScratch& s_;
  ChunkFacts& f_;
  unsigned root_ = 0, choice_ = 0, delta_ = 0, usage_ = 0, details_ = 0, timings_ = 0;
};

}  // namespace

bool ScanChunk(std::string_view data, ChunkScratch* scratch, ChunkFacts* facts) {
  return ChunkReader(data, scratch, facts).Read();
}

}  // namespace capq::internal
