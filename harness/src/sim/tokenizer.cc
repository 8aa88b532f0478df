#include "capq/sim/tokenizer.h"

#include <algorithm>

namespace capq::sim {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// Syllables for output words: 32 consonant-vowel pairs, so a word is 2-3 of them (5 bits each).
constexpr const char* kSyllables[32] = {
    "ba", "be", "bi", "bo", "da", "de", "di", "do", "ka", "ke", "ki", "ko", "la", "le", "li", "lo",
    "ma", "me", "mi", "mo", "na", "ne", "ni", "no", "ra", "re", "ri", "ro", "sa", "se", "si", "so"};

std::string TemplateWord(int position) {
  return "<|capq_template_" + std::to_string(position) + "|>";
}

uint32_t TemplateId(int position) { return WordTokenId(TemplateWord(position)); }

std::string TurnWord(int position) { return "<|capq_turn_" + std::to_string(position) + "|>"; }

bool IsAssistant(const ChatMessage& m) { return m.role == "assistant"; }

// The markers that follow message k of `n`: the suffix before an assistant message and at the end,
// the turn markers after an assistant message (then the suffix too if it is the last one).
struct MarkersAfter {
  bool turn = false;
  bool suffix = false;
};
MarkersAfter Markers(const std::vector<ChatMessage>& m, size_t k) {
  MarkersAfter a;
  a.turn = IsAssistant(m[k]);
  a.suffix = k + 1 == m.size() || (!a.turn && IsAssistant(m[k + 1]));
  return a;
}

ChatTemplate Clamped(ChatTemplate t) {
  t.tokens = std::max(0, t.tokens);
  t.prefix_tokens = std::clamp(t.prefix_tokens, 0, t.tokens);
  t.bos = t.bos && t.prefix_tokens > 0;
  t.turn_tokens = std::max(0, t.turn_tokens);
  return t;
}

}  // namespace

uint64_t Mix64(uint64_t a, uint64_t b) {
  uint64_t z = a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint32_t WordTokenId(std::string_view word) {
  uint64_t h = Fnv1a64(word);
  return static_cast<uint32_t>(h ^ (h >> 32));
}

int64_t TokenizeWords(std::string_view text, std::vector<uint32_t>* out) {
  int64_t n = 0;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && IsSpace(text[i])) ++i;
    size_t start = i;
    while (i < text.size() && !IsSpace(text[i])) ++i;
    if (i > start) {
      if (out) out->push_back(WordTokenId(text.substr(start, i - start)));
      ++n;
    }
  }
  return n;
}

int64_t CountWords(std::string_view text) { return TokenizeWords(text, nullptr); }

uint32_t BosTokenId() { return WordTokenId(kBosText); }

namespace {

void RenderPrefix(const ChatTemplate& t, std::string* out) {
  for (int i = t.bos ? 1 : 0; i < t.prefix_tokens; ++i) {
    *out += TemplateWord(i);
    *out += i + 1 < t.prefix_tokens ? ' ' : '\n';
  }
}

// A run of marker words on a line of its own.
template <typename WordFn>
void RenderRun(int first, int end, WordFn word, std::string* out) {
  for (int i = first; i < end; ++i) {
    // The message text already ends a line (every message does); only words need a separator.
    if (i > first || (!out->empty() && !IsSpace(out->back()))) *out += i == first ? '\n' : ' ';
    *out += word(i);
  }
  if (end > first) *out += '\n';
}

void RenderSuffix(const ChatTemplate& t, std::string* out) {
  RenderRun(t.prefix_tokens, t.tokens, TemplateWord, out);
}

void PushPrefix(const ChatTemplate& t, std::vector<uint32_t>* ids) {
  for (int i = 0; i < t.prefix_tokens; ++i)
    ids->push_back(i == 0 && t.bos ? BosTokenId() : TemplateId(i));
}

void PushSuffix(const ChatTemplate& t, std::vector<uint32_t>* ids) {
  for (int i = t.prefix_tokens; i < t.tokens; ++i) ids->push_back(TemplateId(i));
}

}  // namespace

std::vector<uint32_t> ApplyChatTemplate(std::string_view message_text, const ChatTemplate& tmpl) {
  const ChatTemplate t = Clamped(tmpl);
  std::vector<uint32_t> ids;
  ids.reserve(static_cast<size_t>(t.tokens) + message_text.size() / 4);
  PushPrefix(t, &ids);
  TokenizeWords(message_text, &ids);
  PushSuffix(t, &ids);
  return ids;
}

std::vector<uint32_t> ApplyChatTemplate(std::string_view message_text, int chat_template_tokens,
                                        int template_prefix_tokens) {
  return ApplyChatTemplate(message_text,
                           ChatTemplate{chat_template_tokens, template_prefix_tokens, false});
}

std::string RenderChatTemplate(std::string_view message_text, const ChatTemplate& tmpl) {
  const ChatTemplate t = Clamped(tmpl);
  std::string out;
  RenderPrefix(t, &out);
  out.append(message_text);
  RenderSuffix(t, &out);
  return out;
}

std::vector<uint32_t> ApplyChatTemplate(const std::vector<ChatMessage>& messages,
                                        const ChatTemplate& tmpl) {
  const ChatTemplate t = Clamped(tmpl);
  std::vector<uint32_t> ids;
  PushPrefix(t, &ids);
  for (size_t k = 0; k < messages.size(); ++k) {
    TokenizeWords(messages[k].content, &ids);
    const MarkersAfter a = Markers(messages, k);
    if (a.turn) {
      for (int i = 0; i < t.turn_tokens; ++i) ids.push_back(WordTokenId(TurnWord(i)));
    }
    if (a.suffix) PushSuffix(t, &ids);
  }
  if (messages.empty()) PushSuffix(t, &ids);
  return ids;
}

std::string RenderChatTemplate(const std::vector<ChatMessage>& messages, const ChatTemplate& tmpl) {
  const ChatTemplate t = Clamped(tmpl);
  std::string out;
  RenderPrefix(t, &out);
  for (size_t k = 0; k < messages.size(); ++k) {
    out += messages[k].content;
    out += '\n';
    const MarkersAfter a = Markers(messages, k);
    if (a.turn) RenderRun(0, t.turn_tokens, TurnWord, &out);
    if (a.suffix) RenderSuffix(t, &out);
  }
  if (messages.empty()) RenderSuffix(t, &out);
  return out;
}

uint64_t PromptHash(const std::vector<uint32_t>& prompt_ids) {
  uint64_t h = 0x5ca1ab1e0ddba11ull;
  for (uint32_t id : prompt_ids) h = Mix64(h, id);
  return Mix64(h, prompt_ids.size());
}

namespace {
void AppendWord(uint64_t prompt_hash, uint64_t seed, int64_t index, std::string* out) {
  uint64_t h = Mix64(Mix64(prompt_hash, seed), static_cast<uint64_t>(index));
  const int syllables = 2 + static_cast<int>(h & 1);
  h >>= 1;
  for (int i = 0; i < syllables; ++i) {
    out->append(kSyllables[h & 31], 2);
    h >>= 5;
  }
}
}  // namespace

std::string OutputWord(uint64_t prompt_hash, uint64_t seed, int64_t index) {
  std::string w;
  AppendWord(prompt_hash, seed, index, &w);
  return w;
}

void AppendOutputWords(uint64_t prompt_hash, uint64_t seed, int64_t first, int64_t count,
                       std::string* out) {
  for (int64_t i = first; i < first + count; ++i) {
    if (i > 0) out->push_back(' ');
    AppendWord(prompt_hash, seed, i, out);
  }
}

}  // namespace capq::sim
