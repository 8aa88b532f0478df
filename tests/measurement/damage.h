// One random edit of a text, for tests that hold a fast reader to the generic parse on input close
// to what capq's writers write: a byte replaced, dropped or inserted (from `alphabet`), or, with
// `repeat`, a span of up to 11 bytes written twice. `s` must not be empty.
#pragma once

#include <cstddef>
#include <random>
#include <string>

namespace capq::testing {

inline void DamageOnce(std::string* s, std::mt19937& rng, const std::string& alphabet,
                       bool repeat) {
  const size_t at = rng() % s->size();
  const char c = alphabet[rng() % alphabet.size()];
  switch (rng() % (repeat ? 4 : 3)) {
    case 0:
      (*s)[at] = c;
      break;
    case 1:
      s->erase(at, 1);
      break;
    case 2:
      s->insert(s->begin() + static_cast<std::ptrdiff_t>(at), c);
      break;
    default:
      s->insert(at, s->substr(at, rng() % 12));
      break;
  }
}

}  // namespace capq::testing
