#include "capq/model/prompts.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

namespace capq {
namespace {

// A sub-word-like tokenizer: a word is one token, plus one more per 5 letters past the first 5,
// so word counts and token counts differ and calibration has to correct.
int64_t FakeCount(const std::string& text) {
  std::istringstream in(text);
  std::string w;
  int64_t n = 0;
  while (in >> w) n += 1 + static_cast<int64_t>(w.size() > 5 ? (w.size() - 1) / 5 : 0);
  return n;
}

std::string FirstWord(const std::string& s) { return s.substr(0, s.find(' ')); }

TEST(PromptGenerator, LeadWordsAreDistinctAcrossManyPrompts) {
  PromptGenerator gen(42);
  std::set<std::string> leads;
  const int n = PromptGenerator::SingleWordLeads() + 700;  // past the single-word list too
  for (int i = 0; i < n; ++i) leads.insert(gen.LeadWord(i));
  EXPECT_EQ(leads.size(), static_cast<size_t>(n));
}

TEST(PromptGenerator, DeterministicPerSeedAndFreshAcrossSeeds) {
  PromptGenerator a(101), b(101), c(202);
  EXPECT_EQ(a.Text(3, 50), b.Text(3, 50));
  std::set<std::string> first;
  for (int i = 0; i < 72; ++i) first.insert(a.Text(i, 40));
  int shared = 0;
  for (int i = 0; i < 72; ++i) shared += first.count(c.Text(i, 40));
  EXPECT_EQ(shared, 0);
}

TEST(MakePrompts, ExactLengthInTheCountersTokens) {
  PromptGenerator gen(7);
  TokenCounter counter = [](const std::string& t) -> Result<int64_t> { return FakeCount(t); };
  std::vector<int64_t> targets = {1, 2, 17, 512, 2048, 8192};
  auto prompts = MakePrompts(gen, 0, targets, &counter);
  ASSERT_TRUE(prompts.ok()) << prompts.status().ToString();
  ASSERT_EQ(prompts->size(), targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    EXPECT_EQ(FakeCount((*prompts)[i].text), targets[i]) << "prompt " << i;
    EXPECT_EQ((*prompts)[i].message_tokens, targets[i]);
    EXPECT_TRUE((*prompts)[i].calibrated);
  }
}

TEST(MakePrompts, UniqueAndNoSharedFirstWord) {
  PromptGenerator gen(303);
  std::vector<int64_t> targets(300, 64);
  auto prompts = MakePrompts(gen, 0, targets, nullptr);
  ASSERT_TRUE(prompts.ok());
  std::set<std::string> hashes, firsts;
  for (const auto& p : *prompts) {
    hashes.insert(p.sha256);
    firsts.insert(FirstWord(p.text));
    EXPECT_EQ(FirstWord(p.text), p.lead_word);
    EXPECT_EQ(p.sha256, TextSha256Hex(p.text));
  }
  EXPECT_EQ(hashes.size(), targets.size());
  EXPECT_EQ(firsts.size(), targets.size());
}

TEST(MakePrompts, CounterErrorNamesThePrompt) {
  PromptGenerator gen(1);
  TokenCounter broken = [](const std::string&) -> Result<int64_t> {
    return Status::Unavailable("tokenize returned 500");
  };
  auto prompts = MakePrompts(gen, 4, {10}, &broken);
  ASSERT_FALSE(prompts.ok());
  EXPECT_NE(prompts.status().message().find("prompt 4"), std::string::npos);
  EXPECT_NE(prompts.status().message().find("tokenize returned 500"), std::string::npos);
}

TEST(MakePrompts, UnreachableLengthIsAnError) {
  PromptGenerator gen(1);
  // Every word counts as two tokens: an odd target cannot be met.
  TokenCounter doubled = [](const std::string& t) -> Result<int64_t> {
    std::istringstream in(t);
    std::string w;
    int64_t n = 0;
    while (in >> w) n += 2;
    return n;
  };
  auto prompts = MakePrompts(gen, 0, {101}, &doubled);
  ASSERT_FALSE(prompts.ok());
  EXPECT_NE(prompts.status().message().find("exactly 101 tokens"), std::string::npos);
}

TEST(TextSha256Hex, KnownVector) {
  EXPECT_EQ(TextSha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace capq
