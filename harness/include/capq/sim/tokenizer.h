// The simulator's deterministic word tokenizer, chat template and output text.
//
// A token is a maximal run of non-whitespace bytes, whitespace being the ASCII characters
// ' ', '\t', '\n', '\v', '\f', '\r'. Its id is a 32-bit hash of its bytes (FNV-1a 64 folded to 32
// bits), so the same word always has the same id and the text itself needs no vocabulary.
//
// Chat template: a conversation's prompt is
//   [template prefix: template_prefix_tokens ids, identical for every prompt]
//   [message tokens: the words of every message's content, in order]
//   [template suffix: chat_template_tokens - template_prefix_tokens ids, also constant]
// so prompt_tokens = message tokens + chat_template_tokens, and two different conversations share
// exactly the template prefix (plus whatever leading words their messages share), as on a real
// server whose template starts with a fixed header and puts role markers around each message.
//
// Output text: output token i of a request is a pronounceable lowercase word derived from a hash of
// (prompt hash, seed, i); deltas join words with single spaces, so re-tokenizing a stream's text
// gives back completion_tokens words. Same prompt and seed -> same text; different prompts ->
// different text (up to a 64-bit hash collision).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "capq/hash.h"

namespace capq::sim {

// A well-mixed combination of two 64-bit values (splitmix64 finaliser), for seeds and indices.
uint64_t Mix64(uint64_t a, uint64_t b);

uint32_t WordTokenId(std::string_view word);
// Appends the token ids of `text`'s words to `out`; returns how many were appended.
int64_t TokenizeWords(std::string_view text, std::vector<uint32_t>* out);
int64_t CountWords(std::string_view text);

// Builds a conversation's prompt token ids: template prefix + `message_text` words + suffix.
// `message_text` is every message's content joined by newlines.
std::vector<uint32_t> ApplyChatTemplate(std::string_view message_text, int chat_template_tokens,
                                        int template_prefix_tokens);

// A stable hash of a prompt's token ids: the key of its output text.
uint64_t PromptHash(const std::vector<uint32_t>& prompt_ids);

// Output word number `index` (0-based) for a request keyed by (prompt_hash, seed).
std::string OutputWord(uint64_t prompt_hash, uint64_t seed, int64_t index);
// Appends output words [first, first + count) to `out`: a leading space before every word except
// word 0, so concatenating all deltas gives "w0 w1 w2 ...".
void AppendOutputWords(uint64_t prompt_hash, uint64_t seed, int64_t first, int64_t count,
                       std::string* out);

}  // namespace capq::sim
