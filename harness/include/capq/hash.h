// Small deterministic hashes for seeds, draws and ids. They give the same value on every platform
// and standard library (std::hash and the std distributions do not), which seeded prompts,
// simulator outputs and derived trial seeds depend on: a row must mean the same run everywhere.
#pragma once

#include <cstdint>
#include <string_view>

namespace capq {

// The splitmix64 finaliser: a cheap, well-spread counter-based draw.
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// FNV-1a, 64 bits; `basis` lets a caller continue a hash over several pieces.
inline uint64_t Fnv1a64(std::string_view bytes, uint64_t basis = 14695981039346656037ULL) {
  uint64_t h = basis;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// FNV-1a, 32 bits.
inline uint32_t Fnv1a32(std::string_view bytes) {
  uint32_t h = 2166136261u;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

// The top 53 bits of `h` as a double in [0, 1).
inline double UnitInterval(uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

}  // namespace capq
