// Seeded synthetic prompts (seed, Part III: unique prompts, disjoint warm-up, no shared prefixes).
//
// A prompt is a run of plain lowercase words separated by single spaces, led by one word
// (capitalised, then in lower case once those run out) that no other prompt of the same generator
// starts with, so no two prompts share a first token and the cache can only ever reuse the chat
// template's own leading tokens. Lengths are exact in the server's own tokens when a TokenCounter
// (the server's tokenize endpoint) is given: the word count is corrected until the server counts
// exactly the target. Pure: no I/O of its own.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "capq/status.h"

namespace capq {

// Tokens the server counts in `text` (the message alone, no chat template, no special tokens).
using TokenCounter = std::function<Result<int64_t>(const std::string& text)>;

struct Prompt {
  std::string text;
  int generator_index = 0;     // which of the generator's prompts (the text is a function of it)
  std::string lead_word;       // the first word: unique across one generator's prompts
  int64_t target_tokens = 0;   // what was asked for
  int64_t message_tokens = 0;  // what the server counted (== target when calibrated), else words
  bool calibrated = false;     // counted by the server's tokenizer
  std::string sha256;          // lowercase hex of `text`
};

// Deterministic text source. Prompt i of a generator depends only on (seed, i, words).
class PromptGenerator {
 public:
  explicit PromptGenerator(uint64_t seed);
  // The lead word of prompt `index`: distinct for every index of one generator.
  std::string LeadWord(int index) const;
  // `words` words (>= 1): the lead word followed by seeded vocabulary words.
  std::string Text(int index, int64_t words) const;
  // Number of distinct single real-word leads before the generator falls back to compound leads
  // (which are distinct strings but may share a first token in a sub-word tokenizer).
  static int SingleWordLeads();

 private:
  uint64_t seed_;
  std::vector<int> lead_order_;  // seeded permutation of the lead list
};

// Builds prompts `indices[k]` of `gen`, one per target length (indices distinct).
Result<std::vector<Prompt>> MakePrompts(const PromptGenerator& gen, const std::vector<int>& indices,
                                        const std::vector<int64_t>& target_tokens,
                                        const TokenCounter* counter);
// Builds prompts `first_index .. first_index + targets.size() - 1` of `gen`, one per target length.
// With a counter, every prompt's length is exact in the server's tokens (an error names the prompt
// when the count cannot be met within a few corrections); without one, a word counts as a token.
Result<std::vector<Prompt>> MakePrompts(const PromptGenerator& gen, int first_index,
                                        const std::vector<int64_t>& target_tokens,
                                        const TokenCounter* counter);

// Lowercase hex SHA-256 of `bytes`.
std::string TextSha256Hex(const std::string& bytes);

}  // namespace capq
