// The word tokenizer, chat template and output text.
#include "capq/sim/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace capq::sim {
namespace {

TEST(TokenizerTest, TokensAreMaximalRunsOfNonSpace) {
  std::vector<uint32_t> ids;
  EXPECT_EQ(TokenizeWords("  hello,   world!\tfoo\nbar\r\n", &ids), 4);
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(ids[0], WordTokenId("hello,"));
  EXPECT_EQ(ids[1], WordTokenId("world!"));
  EXPECT_EQ(CountWords(""), 0);
  EXPECT_EQ(CountWords(" \t\n"), 0);
  EXPECT_EQ(CountWords("a"), 1);
  EXPECT_NE(WordTokenId("a"), WordTokenId("b"));
  EXPECT_EQ(WordTokenId("same"), WordTokenId("same"));
}

TEST(TokenizerTest, TemplatePrefixIsSharedAndTheRestFollowsTheMessage) {
  auto a = ApplyChatTemplate("one two", 10, 3);
  auto b = ApplyChatTemplate("three four five", 10, 3);
  ASSERT_EQ(a.size(), 12u);
  ASSERT_EQ(b.size(), 13u);
  size_t common = 0;
  while (common < a.size() && a[common] == b[common]) ++common;
  EXPECT_EQ(common, 3u);  // distinct messages share exactly the template prefix
  // The suffix is the same constant for every prompt.
  EXPECT_TRUE(std::equal(a.end() - 7, a.end(), b.end() - 7));
  EXPECT_EQ(a[3], WordTokenId("one"));
  // Prefix larger than the template is clamped.
  EXPECT_EQ(ApplyChatTemplate("x", 2, 5).size(), 3u);
}

TEST(TokenizerTest, OutputTextIsDeterministicAndRetokenizesToItsLength) {
  const uint64_t h = PromptHash(ApplyChatTemplate("a prompt", 10, 3));
  std::string all;
  AppendOutputWords(h, 0, 0, 3, &all);
  AppendOutputWords(h, 0, 3, 5, &all);
  EXPECT_EQ(CountWords(all), 8);
  std::string again;
  AppendOutputWords(h, 0, 0, 8, &again);
  EXPECT_EQ(all, again);
  std::string other_seed;
  AppendOutputWords(h, 1, 0, 8, &other_seed);
  EXPECT_NE(all, other_seed);
  std::string other_prompt;
  AppendOutputWords(PromptHash(ApplyChatTemplate("b prompt", 10, 3)), 0, 0, 8, &other_prompt);
  EXPECT_NE(all, other_prompt);
}

TEST(TokenizerTest, ThousandPromptsGiveThousandDistinctOutputs) {
  std::set<std::string> texts;
  for (int i = 0; i < 1000; ++i) {
    std::string t;
    AppendOutputWords(PromptHash(ApplyChatTemplate("prompt " + std::to_string(i), 10, 3)), 0, 0, 16,
                      &t);
    texts.insert(t);
  }
  EXPECT_EQ(texts.size(), 1000u);
}

}  // namespace
}  // namespace capq::sim

namespace capq::sim {
namespace {

TEST(TokenizerTest, RenderedTemplateTokenizesToTheTemplateIds) {
  for (bool bos : {false, true}) {
    const ChatTemplate t{10, 4, bos};
    const std::string messages = "hello world\nsecond turn\n";
    std::vector<uint32_t> ids;
    if (bos) ids.push_back(BosTokenId());
    TokenizeWords(RenderChatTemplate(messages, t), &ids);
    EXPECT_EQ(ids, ApplyChatTemplate(messages, t)) << "bos " << bos;
    EXPECT_EQ(ids.size(), 4u + 10u);
    EXPECT_EQ(RenderChatTemplate(messages, t).find("<s>"), std::string::npos);
    // Two renders whose first words differ share exactly the template prefix.
    const auto other = ApplyChatTemplate("goodbye world\n", t);
    size_t lcp = 0;
    while (lcp < other.size() && other[lcp] == ids[lcp]) ++lcp;
    EXPECT_EQ(lcp, 4u);
  }
  EXPECT_EQ(ApplyChatTemplate("x", ChatTemplate{10, 4, true})[0], BosTokenId());
  EXPECT_EQ(ApplyChatTemplate("x", 10, 3), ApplyChatTemplate("x", ChatTemplate{10, 3, false}));
}

ChatTemplate MultiTurnTemplate(bool bos) { return ChatTemplate{10, 3, bos, 4}; }

TEST(TokenizerTest, ChatsWithoutAnAssistantMessageRenderAsTheirJoinedText) {
  for (bool bos : {false, true}) {
    const ChatTemplate t = MultiTurnTemplate(bos);
    const std::vector<ChatMessage> one = {{"user", "one two"}};
    EXPECT_EQ(ApplyChatTemplate(one, t), ApplyChatTemplate("one two\n", t));
    EXPECT_EQ(RenderChatTemplate(one, t), RenderChatTemplate("one two\n", t));
    const std::vector<ChatMessage> two = {{"system", "be brief"}, {"user", "one two"}};
    EXPECT_EQ(ApplyChatTemplate(two, t), ApplyChatTemplate("be brief\none two\n", t));
    EXPECT_EQ(RenderChatTemplate(two, t), RenderChatTemplate("be brief\none two\n", t));
    EXPECT_EQ(ApplyChatTemplate(two, t).size(), 4u + 10u);
  }
}

// The property multi-turn sessions rely on: turn t's prompt, then the ids of the text streamed for
// it, is a prefix of turn t + 1's prompt, which quotes that text as an assistant message.
TEST(TokenizerTest, EachTurnStartsWithThePreviousPromptAndItsOutput) {
  for (bool bos : {false, true}) {
    const ChatTemplate t = MultiTurnTemplate(bos);
    std::vector<ChatMessage> chat = {{"system", "be brief"}, {"user", "first question"}};
    for (int turn = 0; turn < 5; ++turn) {
      const std::vector<uint32_t> prompt = ApplyChatTemplate(chat, t);
      std::string output;
      AppendOutputWords(PromptHash(prompt), 0, 0, 7 + turn, &output);
      std::vector<uint32_t> history = prompt;
      TokenizeWords(output, &history);
      chat.push_back({"assistant", output});
      chat.push_back({"user", "question " + std::to_string(turn)});
      const std::vector<uint32_t> next = ApplyChatTemplate(chat, t);
      // + 4 turn markers + 2 user words + 7 suffix tokens.
      ASSERT_EQ(next.size(), history.size() + 4 + 2 + 7) << turn;
      EXPECT_TRUE(std::equal(history.begin(), history.end(), next.begin())) << turn;
      // The suffix still ends the prompt: the same generation prompt as a one-message chat.
      const std::vector<uint32_t> single = ApplyChatTemplate({{"user", "x"}}, t);
      EXPECT_TRUE(std::equal(single.end() - 7, single.end(), next.end() - 7));
      // The rendered text tokenizes to the same ids (less the BOS, which add_special puts back).
      std::vector<uint32_t> rendered;
      if (bos) rendered.push_back(BosTokenId());
      TokenizeWords(RenderChatTemplate(chat, t), &rendered);
      EXPECT_EQ(rendered, next);
    }
  }
}

TEST(TokenizerTest, TurnMarkersFollowEachAssistantMessage) {
  const ChatTemplate t = MultiTurnTemplate(false);
  const std::vector<ChatMessage> chat = {{"user", "a"}, {"assistant", "b"}, {"user", "c"}};
  const std::string text = RenderChatTemplate(chat, t);
  EXPECT_EQ(text,
            "<|capq_template_0|> <|capq_template_1|> <|capq_template_2|>\n"
            "a\n"
            "<|capq_template_3|> <|capq_template_4|> <|capq_template_5|> <|capq_template_6|> "
            "<|capq_template_7|> <|capq_template_8|> <|capq_template_9|>\n"
            "b\n"
            "<|capq_turn_0|> <|capq_turn_1|> <|capq_turn_2|> <|capq_turn_3|>\n"
            "c\n"
            "<|capq_template_3|> <|capq_template_4|> <|capq_template_5|> <|capq_template_6|> "
            "<|capq_template_7|> <|capq_template_8|> <|capq_template_9|>\n");
  EXPECT_EQ(ApplyChatTemplate(chat, t).size(), 3u + 10u + 4u + 7u);
  // No turn markers configured: the assistant message runs straight into the next user one.
  ChatTemplate bare = t;
  bare.turn_tokens = 0;
  EXPECT_EQ(ApplyChatTemplate(chat, bare).size(), 3u + 10u + 7u);
}

}  // namespace
}  // namespace capq::sim
