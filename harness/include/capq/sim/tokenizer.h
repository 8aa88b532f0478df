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
// A conversation with assistant messages renders turn by turn, as ChatML-style templates do:
//   [prefix] [words of the messages up to the first assistant one] [suffix]
//   [assistant words] [turn markers: turn_tokens ids] [next messages' words] [suffix] ...
// The suffix (the generation prompt, exactly what ends a single-message prompt) follows the
// messages before each assistant message and ends the prompt; the turn markers follow each
// assistant message (Phi-3's "<|end|>\n<|user|>\n", ChatML's "<|im_end|>\n<|im_start|>user\n";
// conformance/llamacpp recording 11 renders system + user + assistant + user that way). Messages
// with no assistant message between them join as before (Phi-3 folds the system message into the
// user turn, recording 11). So the prompt of turn t followed by the ids of the text the server
// streamed for it is a prefix of the prompt of turn t + 1, whose history ends with that text as an
// assistant message: a prefix cache holding turn t's prompt + output serves it.
// The template is also text (RenderChatTemplate): marker words "<|capq_template_N|>" separated
// from the message by whitespace, so tokenizing the rendered text gives back the same ids and a
// client can measure the shared prefix from the server itself (/apply-template + /tokenize, or
// a chat /tokenize). With a BOS (llama.cpp's {{ bos_token }}), marker 0 is the BOS token "<s>":
// the rendered text leaves it out and tokenizing with add_special puts it back in front.
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

struct ChatTemplate {
  int tokens = 0;         // chat_template_tokens
  int prefix_tokens = 0;  // template_prefix_tokens (BOS included)
  bool bos = false;       // marker 0 is the BOS token
  int turn_tokens = 0;    // chat_turn_tokens: the markers after an assistant message
};

// One chat message: its role and its content (text parts concatenated).
struct ChatMessage {
  std::string role;
  std::string content;
};

inline constexpr std::string_view kBosText = "<s>";
uint32_t BosTokenId();  // WordTokenId("<s>")

// Builds a conversation's prompt token ids: template prefix + `message_text` words + suffix.
// `message_text` is every message's content joined by newlines.
std::vector<uint32_t> ApplyChatTemplate(std::string_view message_text, const ChatTemplate& t);
std::vector<uint32_t> ApplyChatTemplate(std::string_view message_text, int chat_template_tokens,
                                        int template_prefix_tokens);
// The template as text, without the BOS: TokenizeWords(RenderChatTemplate(m, t)) equals
// ApplyChatTemplate(m, t) minus its leading BOS.
std::string RenderChatTemplate(std::string_view message_text, const ChatTemplate& t);
// The per-message template above. Without an assistant message it equals the forms above with
// every message's content + "\n" joined as `message_text`.
std::vector<uint32_t> ApplyChatTemplate(const std::vector<ChatMessage>& messages,
                                        const ChatTemplate& t);
std::string RenderChatTemplate(const std::vector<ChatMessage>& messages, const ChatTemplate& t);

// A stable hash of a prompt's token ids: the key of its output text.
uint64_t PromptHash(const std::vector<uint32_t>& prompt_ids);

// Output word number `index` (0-based) for a request keyed by (prompt_hash, seed).
std::string OutputWord(uint64_t prompt_hash, uint64_t seed, int64_t index);
// Appends output words [first, first + count) to `out`: a leading space before every word except
// word 0, so concatenating all deltas gives "w0 w1 w2 ...".
void AppendOutputWords(uint64_t prompt_hash, uint64_t seed, int64_t first, int64_t count,
                       std::string* out);

}  // namespace capq::sim
