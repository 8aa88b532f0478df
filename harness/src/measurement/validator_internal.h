// Wording helpers and gate plumbing shared by the validator's files (validator.cc: the stream
// and set gates; validator_counts.cc: the gates where the text proves the server's counters).
#pragma once

#include <string>
#include <vector>

#include "capq/measurement/validator.h"

namespace capq::validator_internal {

inline constexpr size_t kMaxIdsInWords = 20;

inline std::string Join(const std::vector<std::string>& items, size_t max_items = kMaxIdsInWords) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < max_items; ++i) {
    if (i > 0) out += ", ";
    out += items[i];
  }
  if (items.size() > max_items) out += " (+" + std::to_string(items.size() - max_items) + " more)";
  return out;
}

// 15838 -> "15,838"
inline std::string Count(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

inline std::string Of(size_t bad, size_t total, const char* noun) {
  return std::to_string(bad) + " of " + std::to_string(total) + " " + noun;
}

inline std::string Quote(const std::string& s) {
  std::string out = "'";
  for (unsigned char c : s) {
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  return out + "'";
}

// Request id for the prompt hash at `index` of a phase ("w3"), or a positional name.
inline std::string PromptName(const std::vector<RequestResult>& results, size_t index,
                              const char* phase) {
  for (const RequestResult& r : results) {
    if (r.index == static_cast<int>(index)) return r.id;
  }
  return std::string(phase) + " prompt #" + std::to_string(index);
}

inline GateResult NewGate(const char* name) {
  GateResult g;
  g.name = name;
  return g;
}

inline GateResult ApplyRow(GateResult g, const Gate& row_gate) {
  if (!row_gate.enabled) {
    g.enabled = false;
    g.evidence =
        "disabled by the row: " +
        (row_gate.reason_off.empty() ? std::string("(no reason given)") : row_gate.reason_off) +
        "; observed: " + g.evidence;
  }
  return g;
}

GateResult TextRecount(const ValidationInput& in);
GateResult PromptTokens(const ValidationInput& in);
GateResult ModelName(const ValidationInput& in);
GateResult CacheReuse(const ValidationInput& in);      // validator_reuse.cc
GateResult SessionHistory(const ValidationInput& in);  // validator_reuse.cc

}  // namespace capq::validator_internal
