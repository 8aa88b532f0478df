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

ChatTemplate Clamped(ChatTemplate t) {
  t.tokens = std::max(0, t.tokens);
  t.prefix_tokens = std::clamp(t.prefix_tokens, 0, t.tokens);
  t.bos = t.bos && t.prefix_tokens > 0;
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

std::vector<uint32_t> ApplyChatTemplate(std::string_view message_text, const ChatTemplate& tmpl) {
  const ChatTemplate t = Clamped(tmpl);
  std::vector<uint32_t> ids;
  ids.reserve(static_cast<size_t>(t.tokens) + message_text.size() / 4);
  for (int i = 0; i < t.prefix_tokens; ++i)
    ids.push_back(i == 0 && t.bos ? BosTokenId() : TemplateId(i));
  TokenizeWords(message_text, &ids);
  for (int i = t.prefix_tokens; i < t.tokens; ++i) ids.push_back(TemplateId(i));
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
  for (int i = t.bos ? 1 : 0; i < t.prefix_tokens; ++i) {
    out += TemplateWord(i);
    out += i + 1 < t.prefix_tokens ? ' ' : '\n';
  }
  out.append(message_text);
  for (int i = t.prefix_tokens; i < t.tokens; ++i) {
    // The message text already ends a line (every message does); only words need a separator.
    if (i > t.prefix_tokens || (!out.empty() && !IsSpace(out.back()))) {
      out += i == t.prefix_tokens ? '\n' : ' ';
    }
    out += TemplateWord(i);
  }
  if (t.tokens > t.prefix_tokens) out += '\n';
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
