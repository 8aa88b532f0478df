#include "capq/model/prompts.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "capq/hash.h"

namespace capq {
namespace {

// Short common English words: each is a single token with its leading space in the usual BPE
// vocabularies, so a word count is a good first guess of a token count before calibration.
// Spelled as std::array<const char*, N> through std::to_array: the deduction guide's fold over
// every element exceeds clang's nesting limit (the fuzz build).
constexpr auto kWords = std::to_array<const char*>({
    "time",     "year",    "people",   "way",      "day",     "man",      "thing",   "woman",
    "life",     "child",   "world",    "school",   "state",   "family",   "student", "group",
    "country",  "problem", "hand",     "part",     "place",   "case",     "week",    "company",
    "system",   "program", "question", "work",     "number",  "night",    "point",   "home",
    "water",    "room",    "mother",   "area",     "money",   "story",    "fact",    "month",
    "lot",      "right",   "study",    "book",     "eye",     "job",      "word",    "business",
    "issue",    "side",    "kind",     "head",     "house",   "service",  "friend",  "father",
    "power",    "hour",    "game",     "line",     "end",     "member",   "law",     "car",
    "city",     "name",    "team",     "minute",   "idea",    "kid",      "body",    "back",
    "parent",   "face",    "others",   "level",    "office",  "door",     "health",  "person",
    "art",      "war",     "history",  "party",    "result",  "change",   "morning", "reason",
    "research", "girl",    "guy",      "moment",   "air",     "teacher",  "force",   "education",
    "foot",     "boy",     "age",      "policy",   "music",   "market",   "sense",   "nation",
    "plan",     "college", "interest", "death",    "land",    "field",    "river",   "stone",
    "bridge",   "garden",  "window",   "table",    "paper",   "letter",   "road",    "street",
    "horse",    "bird",    "tree",     "flower",   "summer",  "winter",   "spring",  "autumn",
    "rain",     "snow",    "wind",     "cloud",    "light",   "dark",     "fire",    "earth",
    "sea",      "sky",     "sun",      "moon",     "star",    "king",     "queen",   "village",
    "castle",   "forest",  "mountain", "valley",   "island",  "ship",     "train",   "station",
    "market",   "bread",   "wine",     "salt",     "gold",    "silver",   "iron",    "glass",
    "wood",     "cloth",   "song",     "dance",    "voice",   "sound",    "color",   "shape",
    "size",     "weight",  "speed",    "answer",   "letter",  "picture",  "film",    "play",
    "stage",    "scene",   "actor",    "crowd",    "small",   "large",    "old",     "young",
    "long",     "short",   "high",     "low",      "early",   "late",     "good",    "great",
    "new",      "little",  "big",      "strong",   "quiet",   "warm",     "cold",    "green",
    "blue",     "red",     "white",    "black",    "bright",  "simple",   "clear",   "open",
    "full",     "free",    "true",     "real",     "whole",   "certain",  "public",  "private",
    "walk",     "run",     "read",     "write",    "speak",   "listen",   "watch",   "carry",
    "build",    "break",   "hold",     "bring",    "begin",   "keep",     "turn",    "start",
    "show",     "hear",    "move",     "live",     "believe", "happen",   "learn",   "follow",
    "stop",     "create",  "offer",    "remember", "love",    "consider", "appear",  "buy",
    "wait",     "serve",   "die",      "send",     "expect",  "stay",     "fall",    "cut",
    "reach",    "kill",    "remain",   "suggest",  "raise",   "pass",     "sell",    "decide",
    "return",   "explain", "hope",     "develop",  "drive",   "agree",    "slowly",  "often",
    "always",   "never",   "again",    "almost",   "later",   "together", "today",   "under",
    "over",     "between", "through",  "after",    "before",  "along",    "across",  "behind",
});

// Lead words: capitalised at the start of the text (no leading space), a different token from the
// same word inside the text. Distinct entries only.
std::vector<std::string> BuildLeads() {
  std::vector<std::string> leads;
  for (const char* w : kWords) {
    std::string s(w);
    s[0] = static_cast<char>(s[0] - 'a' + 'A');
    if (std::find(leads.begin(), leads.end(), s) == leads.end()) leads.push_back(s);
  }
  return leads;
}

const std::vector<std::string>& Leads() {
  static const std::vector<std::string> leads = BuildLeads();
  return leads;
}

}  // namespace

PromptGenerator::PromptGenerator(uint64_t seed) : seed_(seed) {
  const int n = static_cast<int>(Leads().size());
  lead_order_.resize(n);
  for (int i = 0; i < n; ++i) lead_order_[i] = i;
  uint64_t state = SplitMix64(seed ^ 0x6c656164ULL);
  for (int i = n - 1; i > 0; --i) {  // Fisher-Yates with the seeded stream
    state = SplitMix64(state);
    std::swap(lead_order_[i], lead_order_[state % static_cast<uint64_t>(i + 1)]);
  }
}

int PromptGenerator::SingleWordLeads() { return 2 * static_cast<int>(Leads().size()); }

std::string PromptGenerator::LeadWord(int index) const {
  const int n = static_cast<int>(lead_order_.size());
  if (index < n) return Leads()[lead_order_[index]];
  // Second tier: the same words in lower case. At the start of a text (no leading space) "river"
  // is its own token in the usual BPE vocabularies, distinct from "River" and " river".
  if (index < 2 * n) {
    std::string s = Leads()[lead_order_[index - n]];
    s[0] = static_cast<char>(s[0] - 'A' + 'a');
    return s;
  }
  // Past both tiers: "Riverstone"-like compounds, still distinct strings per index (a sub-word
  // tokenizer may split them so that they share a first token with a first-tier prompt).
  int k = index - 2 * n;
  int a = lead_order_[k % n];
  int b = (k / n) % static_cast<int>(kWords.size());
  return Leads()[a] + kWords[b];
}

std::string PromptGenerator::Text(int index, int64_t words) const {
  std::string out = LeadWord(index);
  uint64_t state = SplitMix64(seed_ ^ SplitMix64(static_cast<uint64_t>(index) + 1));
  out.reserve(static_cast<size_t>(words) * 7);
  for (int64_t i = 1; i < words; ++i) {
    state = SplitMix64(state);
    out += ' ';
    out += kWords[state % kWords.size()];
  }
  return out;
}

Result<std::vector<Prompt>> MakePrompts(const PromptGenerator& gen, int first_index,
                                        const std::vector<int64_t>& target_tokens,
                                        const TokenCounter* counter) {
  std::vector<int> indices(target_tokens.size());
  for (size_t k = 0; k < indices.size(); ++k) indices[k] = first_index + static_cast<int>(k);
  return MakePrompts(gen, indices, target_tokens, counter);
}

namespace {

// What the word-count search learned about one prompt.
struct WordFit {
  bool met = false;       // a word count gave exactly the target (the prompt holds its text)
  int64_t lo = 0;         // the longest word count known to fit below the target
  int64_t lo_tokens = 0;  // its length in tokens
};

Status CountingError(const Status& status, int index) {
  return status.WithContext("counting the tokens of prompt " + std::to_string(index));
}

// Phase 1: the largest word count whose text is not longer than the target (a word may be more
// than one token, so a word count alone cannot always hit the target). The first guess comes from
// *tokens_per_word, which an exact hit updates.
Status FitWords(const PromptGenerator& gen, int index, int64_t target, const TokenCounter& counter,
                double* tokens_per_word, Prompt* p, WordFit* fit) {
  int64_t words = std::max<int64_t>(1, std::llround(target / *tokens_per_word));
  int64_t hi = 0;  // the shortest known overshoot
  for (int attempt = 0; attempt < 32 && !fit->met; ++attempt) {
    std::string text = gen.Text(index, words);
    Result<int64_t> count = counter(text);
    if (!count.ok()) return CountingError(count.status(), index);
    const int64_t n = *count;
    if (n == target) {
      p->text = std::move(text);
      p->message_tokens = n;
      fit->met = true;
      if (words > 0 && n > 0) *tokens_per_word = static_cast<double>(n) / words;
      break;
    }
    if (n < target) {
      if (words > fit->lo) fit->lo = words, fit->lo_tokens = n;
    } else {
      hi = hi == 0 ? words : std::min(hi, words);
    }
    if (hi > 0 && hi - fit->lo <= 1 && fit->lo > 0) break;
    if (hi == 1) break;  // the lead word alone is already too long
    int64_t next = words + (target - n);
    if (hi > 0) next = std::min(next, hi - 1);
    if (fit->lo > 0) next = std::max(next, fit->lo + 1);
    if (next == words) next = hi > 0 ? (fit->lo + hi) / 2 : words + 1;
    words = std::max<int64_t>(1, next);
  }
  return Status::Ok();
}

// Phase 2: pad the longest fit with one-letter words (" a": one token in every tokenizer we know
// of) until the count is exact.
Status PadToTarget(const PromptGenerator& gen, int index, int64_t target,
                   const TokenCounter& counter, const WordFit& fit, Prompt* p, bool* met) {
  const std::string base = gen.Text(index, fit.lo);
  int64_t pad = target - fit.lo_tokens;
  for (int attempt = 0; attempt < 8 && pad > 0 && !*met; ++attempt) {
    std::string text = base;
    for (int64_t i = 0; i < pad; ++i) text += " a";
    Result<int64_t> count = counter(text);
    if (!count.ok()) return CountingError(count.status(), index);
    if (*count == target) {
      p->text = std::move(text);
      p->message_tokens = target;
      *met = true;
    } else {
      pad += target - *count;
    }
  }
  return Status::Ok();
}

// The text of prompt `index` with exactly `target` tokens as `counter` counts them.
Status CalibratePrompt(const PromptGenerator& gen, int index, int64_t target,
                       const TokenCounter& counter, double* tokens_per_word, Prompt* p) {
  WordFit fit;
  if (Status s = FitWords(gen, index, target, counter, tokens_per_word, p, &fit); !s.ok()) {
    return s;
  }
  bool met = fit.met;
  if (!met && fit.lo > 0) {
    if (Status s = PadToTarget(gen, index, target, counter, fit, p, &met); !s.ok()) return s;
  }
  if (!met) {
    return Status::FailedPrecondition(
        "prompt " + std::to_string(index) + ": could not reach exactly " + std::to_string(target) +
        " tokens in the server's tokenizer by adding or removing words");
  }
  p->calibrated = true;
  return Status::Ok();
}

}  // namespace

Result<std::vector<Prompt>> MakePrompts(const PromptGenerator& gen, const std::vector<int>& indices,
                                        const std::vector<int64_t>& target_tokens,
                                        const TokenCounter* counter) {
  if (indices.size() != target_tokens.size()) {
    return Status::InvalidArgument("MakePrompts: one generator index per target length");
  }
  std::vector<Prompt> out;
  out.reserve(target_tokens.size());
  double tokens_per_word = 1.0;  // learned from the previous prompt so most need one count
  for (size_t k = 0; k < target_tokens.size(); ++k) {
    const int index = indices[k];
    const int64_t target = target_tokens[k];
    if (target < 1) {
      return Status::InvalidArgument("prompt " + std::to_string(index) + ": target length " +
                                     std::to_string(target) + " tokens is below 1");
    }
    Prompt p;
    p.generator_index = index;
    p.target_tokens = target;
    p.lead_word = gen.LeadWord(index);
    if (counter == nullptr) {
      p.text = gen.Text(index, target);
      p.message_tokens = target;
    } else if (Status s = CalibratePrompt(gen, index, target, *counter, &tokens_per_word, &p);
               !s.ok()) {
      return s;
    }
    p.sha256 = TextSha256Hex(p.text);
    out.push_back(std::move(p));
  }
  return out;
}

std::string TextSha256Hex(const std::string& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

}  // namespace capq
