// Multi-turn chats through the live server: each turn quotes the text the server streamed for the
// previous one, and the prefix cache serves that turn's prompt + output as cached tokens.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "capq/sim/tokenizer.h"
#include "server_test_util.h"

namespace capq::sim {
namespace {

using namespace capq::sim::testing;

struct Turn {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  std::string text;
};

json Message(const std::string& role, const std::string& content) {
  return {{"role", role}, {"content", content}};
}

Turn Send(const std::string& url, const json& messages, int max_tokens) {
  const json body = {{"model", "sim-model"},
                     {"messages", messages},
                     {"max_tokens", max_tokens},
                     {"stream", true},
                     {"ignore_eos", true},
                     {"temperature", 0},
                     {"stream_options", {{"include_usage", true}}}};
  const Decoded d = Decode(Post(url + "/v1/chat/completions", body.dump()).body);
  Turn t;
  EXPECT_TRUE(d.usage.is_object());
  if (!d.usage.is_object()) return t;
  t.prompt_tokens = d.usage["prompt_tokens"].get<int64_t>();
  t.completion_tokens = d.usage["completion_tokens"].get<int64_t>();
  t.cached_tokens = CachedTokens(d.usage);
  t.text = d.text;
  return t;
}

std::string Words(const std::string& stem, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? " " : "") + stem + std::to_string(i);
  return s;
}

// Three turns of one conversation; returns them in order.
std::vector<Turn> Conversation(const std::string& url, int max_tokens) {
  json messages = json::array({Message("system", "you are brief"), Message("user", "first q")});
  std::vector<Turn> turns;
  for (int t = 0; t < 3; ++t) {
    turns.push_back(Send(url, messages, max_tokens));
    messages.push_back(Message("assistant", turns.back().text));
    messages.push_back(Message("user", "next question number " + std::to_string(t)));
  }
  return turns;
}

TEST(SessionTest, EachTurnIsServedThePreviousPromptAndOutputOnRadixDialects) {
  // Turn 1 is 15 tokens, turn 2 15 + 20 + 16 = 51, turn 3 51 + 20 + 16 = 87.
  for (Dialect d : {Dialect::kSglang, Dialect::kVllm}) {
    SCOPED_TRACE(DialectName(d));
    auto server = StartServer(TinyProfileYaml(), 1000.0, d);
    ASSERT_NE(server, nullptr);
    const std::vector<Turn> turns = Conversation(server->url(), 20);
    // Turn 1: system + user words (5) + the 10 template tokens; its first 3 are cached only after
    // some request put them in the cache.
    EXPECT_EQ(turns[0].prompt_tokens, 5 + 10);
    EXPECT_EQ(turns[0].cached_tokens, 0);
    for (size_t t = 1; t < turns.size(); ++t) {
      EXPECT_EQ(turns[t].completion_tokens, 20);
      // The radix cache inserted turn t-1's prompt + output - 1 (the last token has no KV); vLLM
      // serves whole 16-token blocks of it (page_size 16 is its block size).
      const int64_t history = turns[t - 1].prompt_tokens + turns[t - 1].completion_tokens - 1;
      EXPECT_EQ(turns[t].cached_tokens, d == Dialect::kVllm ? history / 16 * 16 : history)
          << "turn " << t;
      // New tokens: the last output token, 5 turn markers, 4 user words, 7 suffix tokens.
      EXPECT_EQ(turns[t].prompt_tokens,
                turns[t - 1].prompt_tokens + turns[t - 1].completion_tokens + 5 + 4 + 7);
    }
  }
}

// /tokenize of a chat counts what usage counts, and each turn's ids start with the previous turn's
// ids followed by the ids of the text it streamed.
TEST(SessionTest, ChatTokenizeAgreesWithUsageAndExtendsTurnByTurn) {
  auto server = StartServer(TinyProfileYaml(), 1000.0, Dialect::kSglang);
  ASSERT_NE(server, nullptr);
  const std::string url = server->url();
  auto tokenize = [&](const json& messages) {
    return json::parse(Post(url + "/tokenize", json{{"messages", messages}}.dump()).body);
  };
  json messages = json::array({Message("user", "hello there")});
  for (int t = 0; t < 3; ++t) {
    const json before = tokenize(messages);
    const Turn turn = Send(url, messages, 12);
    EXPECT_EQ(before["count"], turn.prompt_tokens);
    messages.push_back(Message("assistant", turn.text));
    messages.push_back(Message("user", Words("w", t + 1)));
    const json after = tokenize(messages);
    std::vector<uint32_t> expect = before["tokens"].get<std::vector<uint32_t>>();
    TokenizeWords(turn.text, &expect);
    const std::vector<uint32_t> got = after["tokens"].get<std::vector<uint32_t>>();
    ASSERT_GT(got.size(), expect.size());
    EXPECT_TRUE(std::equal(expect.begin(), expect.end(), got.begin())) << "turn " << t;
  }
}

// llama.cpp's /apply-template renders what the chat endpoint tokenizes.
TEST(SessionTest, LlamacppApplyTemplateMatchesUsage) {
  auto server = StartServer(TinyProfileYaml("cache_model: slots\n"), 1000.0, Dialect::kLlamacpp);
  ASSERT_NE(server, nullptr);
  const std::string url = server->url();
  json messages = json::array({Message("user", "hello there")});
  const Turn t1 = Send(url, messages, 8);
  messages.push_back(Message("assistant", t1.text));
  messages.push_back(Message("user", "and then"));
  const std::string prompt = json::parse(
      Post(url + "/apply-template", json{{"messages", messages}}.dump()).body)["prompt"];
  const json tok = json::parse(
      Post(url + "/tokenize", json{{"content", prompt}, {"add_special", true}}.dump()).body);
  const Turn t2 = Send(url, messages, 8);
  EXPECT_EQ(static_cast<int64_t>(tok["tokens"].size()), t2.prompt_tokens);
  EXPECT_NE(prompt.find(t1.text), std::string::npos);
}

std::string SlotsYaml(const std::string& extra = "") {
  return TinyProfileYaml("cache_model: slots\n" + extra);
}

// An idle llama.cpp server sends the second turn to the slot that holds the first turn's prompt +
// output - 1 (ts/server-context.cpp:1600-1676: the most similar slot above
// slot_prompt_similarity).
TEST(SessionTest, LlamacppSecondTurnLandsOnTheSlotHoldingItsHistory) {
  auto server = StartServer(SlotsYaml(), 1000.0, Dialect::kLlamacpp);
  ASSERT_NE(server, nullptr);
  const std::string url = server->url();
  json messages = json::array({Message("user", Words("q", 30))});
  const Turn t1 = Send(url, messages, 16);
  // Another chat on another slot in between; it shares only the template prefix.
  Send(url, json::array({Message("user", Words("other", 40))}), 16);
  messages.push_back(Message("assistant", t1.text));
  messages.push_back(Message("user", "follow up"));
  const Turn t2 = Send(url, messages, 16);
  EXPECT_EQ(t2.cached_tokens, t1.prompt_tokens + t1.completion_tokens - 1);
}

// Other chats took every slot after the first turn: the history survives only in the host prompt
// cache (--cache-ram), which copied the idle slot when they started
// (ts/server-context.cpp:2463-2478).
TEST(SessionTest, LlamacppHistoryLostFromItsSlotComesBackOnlyFromTheHostCache) {
  for (bool host : {true, false}) {
    SCOPED_TRACE(host ? "host cache" : "no host cache");
    auto server = StartServer(SlotsYaml(host ? "" : "host_prompt_cache: false\n"), 1000.0,
                              Dialect::kLlamacpp);
    ASSERT_NE(server, nullptr);
    const std::string url = server->url();
    json messages = json::array({Message("user", Words("q", 30))});
    const Turn t1 = Send(url, messages, 16);
    // Four long chats one after another: each takes the least recently used slot (their
    // similarity to any slot is the 3-token template prefix over 50+ tokens, below 0.10).
    for (int k = 0; k < 4; ++k) {
      Send(url, json::array({Message("user", Words("other" + std::to_string(k) + "_", 50))}), 16);
    }
    messages.push_back(Message("assistant", t1.text));
    messages.push_back(Message("user", "follow up"));
    const Turn t2 = Send(url, messages, 16);
    if (host) {
      EXPECT_EQ(t2.cached_tokens, t1.prompt_tokens + t1.completion_tokens - 1);
    } else {
      EXPECT_EQ(t2.cached_tokens, 3);  // the template prefix every chat shares
    }
  }
}

// prefix_cache: false serves nothing from cache: neither a chat's history nor a repeated prompt.
TEST(SessionTest, PrefixCacheOffReportsNoCachedTokens) {
  for (Dialect d : {Dialect::kSglang, Dialect::kVllm, Dialect::kLlamacpp}) {
    SCOPED_TRACE(DialectName(d));
    const std::string yaml = d == Dialect::kLlamacpp ? SlotsYaml("prefix_cache: false\n")
                                                     : TinyProfileYaml("prefix_cache: false\n");
    auto server = StartServer(yaml, 1000.0, d);
    ASSERT_NE(server, nullptr);
    for (const Turn& t : Conversation(server->url(), 10)) EXPECT_EQ(t.cached_tokens, 0);
    const json same = json::array({Message("user", "same prompt twice")});
    Send(server->url(), same, 4);
    EXPECT_EQ(Send(server->url(), same, 4).cached_tokens, 0);
  }
}

}  // namespace
}  // namespace capq::sim
