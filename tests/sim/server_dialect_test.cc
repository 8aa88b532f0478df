// The vLLM and llama.cpp dialects: their endpoint names, flush calls, info, metrics and chunk
// shapes (server-apis.md), so each engine adapter has a server to talk to.
#include <gtest/gtest.h>

#include "server_test_util.h"

namespace capq::sim {
namespace {

using namespace capq::sim::testing;

std::string Chat(const std::string& url, const std::string& body) {
  return Post(url + "/v1/chat/completions", body).body;
}

int64_t Cached(const Decoded& d) { return CachedTokens(d.usage); }

TEST(DialectTest, NamesParse) {
  EXPECT_EQ(*ParseDialect("vllm"), Dialect::kVllm);
  EXPECT_EQ(*ParseDialect("llamacpp"), Dialect::kLlamacpp);
  EXPECT_EQ(*ParseDialect("sglang"), Dialect::kSglang);
  EXPECT_FALSE(ParseDialect("tgi").ok());
  EXPECT_STREQ(DialectName(Dialect::kVllm), "vllm");
}

class VllmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer(TinyProfileYaml(), 1000.0, Dialect::kVllm);
    ASSERT_NE(server_, nullptr);
    url_ = server_->url();
  }
  std::unique_ptr<SimServer> server_;
  std::string url_;
};

TEST_F(VllmTest, EndpointsHaveVllmNamesAndShapes) {
  HttpResult h = Get(url_ + "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.body, "");
  json models = json::parse(Get(url_ + "/v1/models").body);
  EXPECT_EQ(models["data"][0]["max_model_len"], 4096);
  EXPECT_EQ(models["data"][0]["owned_by"], "vllm");
  json version = json::parse(Get(url_ + "/version").body);
  EXPECT_TRUE(version["version"].is_string());
  EXPECT_FALSE(version.contains("capq_sim")) << "vLLM's /version has no such key";
  EXPECT_EQ(json::parse(Get(url_ + "/capq/sim").body)["identity_digest"],
            server_->identity_digest());
  json tok = json::parse(Post(url_ + "/tokenize", R"({"prompt":"one two three"})").body);
  EXPECT_EQ(tok["count"], 3);
  EXPECT_EQ(tok["max_model_len"], 4096);
  EXPECT_EQ(tok["tokens"].size(), 3u);
  // SGLang's and llama.cpp's names are not served.
  EXPECT_EQ(Get(url_ + "/flush_cache").status, 404);
  EXPECT_EQ(Get(url_ + "/server_info").status, 404);
  EXPECT_EQ(Get(url_ + "/props").status, 404);
}

TEST_F(VllmTest, ChunksLeaveUnsetKeysOutAndUsageDefaultsOnWithStreamOptions) {
  json b = json::parse(ChatBody("vllm shaped", 3, true, true, false));
  b["stream_options"] = json::object();  // vLLM: include_usage defaults to true
  std::string body = Chat(url_, b.dump());
  Decoded d = Decode(body);
  EXPECT_TRUE(d.done_last);
  ASSERT_TRUE(d.usage.is_object());
  EXPECT_EQ(d.usage["completion_tokens"], 3);
  const json& role = d.chunks[0]["choices"][0]["delta"];
  EXPECT_EQ(role["role"], "assistant");
  EXPECT_FALSE(role.contains("reasoning_content"));
  const json& content = d.chunks[1]["choices"][0]["delta"];
  EXPECT_FALSE(content.contains("role"));
  EXPECT_TRUE(content["content"].is_string());
  EXPECT_FALSE(d.chunks[1].contains("usage"));
  EXPECT_EQ(body.find("reasoning_content"), std::string::npos);
  EXPECT_EQ(body.find("matched_stop"), std::string::npos);
  // Errors are wrapped: {"error": {...}}.
  HttpResult bad = Post(url_ + "/v1/chat/completions", "{}");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(json::parse(bad.body)["error"]["code"], 400);
}

// 30 words + 10 template tokens: a repeat hits 39 tokens, which vLLM serves as two whole 16-token
// blocks (page_size 16 is its --block-size).
std::string ThirtyWords() {
  std::string s;
  for (int i = 0; i < 30; ++i) s += (i ? " w" : "w") + std::to_string(i);
  return s;
}

TEST_F(VllmTest, CachedTokensAreWholeBlocks) {
  const std::string p = ThirtyWords();
  EXPECT_EQ(Cached(Decode(Chat(url_, ChatBody(p, 2, true)))), 0);
  EXPECT_EQ(Cached(Decode(Chat(url_, ChatBody(p, 2, true)))), 32);
  // A prompt shorter than a block is never served from cache, not even the template prefix.
  Chat(url_, ChatBody("short", 2, true));
  EXPECT_EQ(Cached(Decode(Chat(url_, ChatBody("short", 2, true)))), 0);
}

TEST_F(VllmTest, ResetPrefixCacheIs200EvenWhenItCannotReset) {
  const std::string p = ThirtyWords();
  Chat(url_, ChatBody(p, 2, true));
  EXPECT_EQ(Cached(Decode(Chat(url_, ChatBody(p, 2, true)))), 32);
  // Idle: 200 and the cache is gone.
  HttpResult r = Post(url_ + "/reset_prefix_cache", "");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(Cached(Decode(Chat(url_, ChatBody(p, 2, true)))), 0);
  // Busy (a slow server): still 200, but nothing was reset.
  auto slow = StartServer(TinyProfileYaml(), 1.0, Dialect::kVllm);
  ASSERT_NE(slow, nullptr);
  const std::string surl = slow->url();
  Chat(surl, ChatBody(p, 2, true));
  std::atomic<bool> stop{false};
  std::thread client([&] {
    CurlOptions o;
    o.on_data = [&](const std::string&) { return !stop.load(); };
    Post(surl + "/v1/chat/completions", ChatBody("long running", 3000, true), o);
  });
  ASSERT_TRUE(WaitFor([&] { return slow->engine_stats().running == 1; }));
  EXPECT_EQ(Post(surl + "/reset_prefix_cache", "").status, 200);
  stop = true;
  client.join();
  ASSERT_TRUE(WaitFor([&] {
    engine::EngineStats st = slow->engine_stats();
    return st.running == 0 && st.waiting == 0;
  }));
  EXPECT_EQ(Cached(Decode(Chat(surl, ChatBody(p, 2, true)))), 32);
}

TEST_F(VllmTest, MetricsHaveVllmNames) {
  Chat(url_, ChatBody(ThirtyWords(), 2, true));
  Chat(url_, ChatBody(ThirtyWords(), 2, true));
  std::string m = Get(url_ + "/metrics").body;
  for (const char* name :
       {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total",
        "vllm:time_to_first_token_seconds_bucket", "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total"}) {
    EXPECT_NE(m.find(name), std::string::npos) << name;
  }
  // 30 words + 10 template, twice; the second hit two 16-token blocks.
  EXPECT_NE(m.find("vllm:prefix_cache_queries_total{model_name=\"sim-model\",engine=\"0\"} 80\n"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("vllm:prefix_cache_hits_total{model_name=\"sim-model\",engine=\"0\"} 32\n"),
            std::string::npos);
  EXPECT_EQ(m.find("sglang:"), std::string::npos);
  // The KV pool vLLM reports only here: 65,536 tokens in blocks of 16.
  EXPECT_NE(m.find("# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size=\"16\","
                   "cache_dtype=\"auto\",enable_prefix_caching=\"True\",engine=\"0\","
                   "num_gpu_blocks=\"4096\"} 1.0\n"),
            std::string::npos)
      << m;
}

// The template prefix two chats share, measured the way each server offers it: vLLM
// POST /tokenize {"messages","add_generation_prompt"} -> {"count","max_model_len","tokens"}, SGLang
// /tokenize and /v1/tokenize with "messages" -> {"tokens","count","max_model_len"}.
TEST(DialectTest, ChatTokenizeGivesTheTemplatedPromptAndItsSharedPrefix) {
  for (Dialect d : {Dialect::kVllm, Dialect::kSglang}) {
    auto server = StartServer(TinyProfileYaml(), 1000.0, d);
    ASSERT_NE(server, nullptr);
    auto chat_tokens = [&](const std::string& path, const std::string& text) {
      const json req = {{"model", "sim-model"},
                        {"messages", {{{"role", "user"}, {"content", text}}}},
                        {"add_generation_prompt", true}};
      return json::parse(Post(server->url() + path, req.dump()).body);
    };
    for (const char* path : d == Dialect::kSglang
                                ? std::vector<const char*>{"/tokenize", "/v1/tokenize"}
                                : std::vector<const char*>{"/tokenize"}) {
      const json a = chat_tokens(path, "alpha two three");
      const json b = chat_tokens(path, "bravo two three");
      ASSERT_EQ(a["count"], 3 + 10) << DialectName(d) << path;
      EXPECT_EQ(a["max_model_len"], 4096);
      EXPECT_EQ(a["tokens"].size(), 13u);
      size_t lcp = 0;
      while (lcp < 13 && a["tokens"][lcp] == b["tokens"][lcp]) ++lcp;
      EXPECT_EQ(lcp, 3u) << "template_prefix_tokens";
      // The same prompt in a chat request: its usage counts exactly these tokens.
      Decoded chat = Decode(
          Post(server->url() + "/v1/chat/completions", ChatBody("alpha two three", 2, true)).body);
      EXPECT_EQ(chat.usage["prompt_tokens"], a["count"]);
    }
    EXPECT_EQ(Post(server->url() + "/tokenize",
                   R"({"prompt":"x","messages":[{"role":"user","content":"x"}]})")
                  .status,
              400);
    json sim = json::parse(Get(server->url() + "/capq/sim").body);
    EXPECT_EQ(sim["dialect"], DialectName(d));
    EXPECT_EQ(sim["identity_digest"], server->identity_digest());
    EXPECT_EQ(sim["profile"], "tiny");
    EXPECT_EQ(sim["time_scale"], 1000.0);
  }
}

class LlamacppTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer(TinyProfileYaml(), 1000.0, Dialect::kLlamacpp);
    ASSERT_NE(server_, nullptr);
    url_ = server_->url();
  }
  std::unique_ptr<SimServer> server_;
  std::string url_;
};

TEST_F(LlamacppTest, EndpointsHaveLlamacppNamesAndShapes) {
  HttpResult h = Get(url_ + "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(json::parse(h.body)["status"], "ok");
  json props = json::parse(Get(url_ + "/props").body);
  EXPECT_EQ(props["total_slots"], 4);
  EXPECT_EQ(props["default_generation_settings"]["n_ctx"], 4096);
  EXPECT_FALSE(props.contains("capq_sim")) << "llama.cpp's /props has no such key";
  json sim = json::parse(Get(url_ + "/capq/sim").body);
  EXPECT_EQ(sim["identity_digest"], server_->identity_digest());
  EXPECT_EQ(sim["dialect"], "llamacpp");
  json slots = json::parse(Get(url_ + "/slots").body);
  ASSERT_EQ(slots.size(), 4u);
  EXPECT_EQ(slots[3]["id"], 3);
  EXPECT_EQ(slots[0]["is_processing"], false);
  json tok = json::parse(Post(url_ + "/tokenize", R"({"content":"a b c d"})").body);
  EXPECT_EQ(tok["tokens"].size(), 4u);
  EXPECT_FALSE(tok.contains("count"));
  // A body that is not JSON: llama.cpp answers 500.
  HttpResult bad = Post(url_ + "/v1/chat/completions", "{nope");
  EXPECT_EQ(bad.status, 500);
  EXPECT_EQ(json::parse(bad.body)["error"]["code"], 500);
  EXPECT_EQ(Get(url_ + "/flush_cache").status, 404);
}

TEST_F(LlamacppTest, FirstChunkHasNullContentAndUsageCarriesTimings) {
  const std::string p = "llama shaped prompt";
  Chat(url_, ChatBody(p, 4, true));
  Decoded d = Decode(Chat(url_, ChatBody(p, 4, true)));
  EXPECT_TRUE(d.done_last);
  const json& role = d.chunks[0]["choices"][0]["delta"];
  EXPECT_EQ(role["role"], "assistant");
  EXPECT_TRUE(role["content"].is_null());
  EXPECT_FALSE(d.chunks[0]["choices"][0].contains("logprobs"));
  EXPECT_EQ(Words(d.text), 4);
  const json& last = d.chunks.back();
  EXPECT_TRUE(last["choices"].empty());
  ASSERT_TRUE(last.contains("timings"));
  EXPECT_EQ(last["timings"]["cache_n"], Cached(d));
  EXPECT_EQ(Cached(d), 12);
  EXPECT_EQ(last["timings"]["prompt_n"], d.usage["prompt_tokens"].get<int64_t>() - 12);
  EXPECT_EQ(last["timings"]["predicted_n"], 4);
  EXPECT_GT(last["timings"]["prompt_ms"].get<double>(), 0.0);
  // Without include_usage there is no usage at all.
  Decoded plain = Decode(Chat(url_, ChatBody("x", 2, true, true, false)));
  EXPECT_TRUE(plain.usage.is_null());
}

TEST_F(LlamacppTest, SlotEraseClearsTheCache) {
  const std::string p = "erase my slot";
  Chat(url_, ChatBody(p, 2, true));
  EXPECT_EQ(Cached(Decode(Chat(url_, ChatBody(p, 2, true)))), 12);
  HttpResult r = Post(url_ + "/slots/0?action=erase", "");
  EXPECT_EQ(r.status, 200);
  json j = json::parse(r.body);
  EXPECT_EQ(j["id_slot"], 0);
  EXPECT_GT(j["n_erased"].get<int64_t>(), 0);
  EXPECT_EQ(Cached(Decode(Chat(url_, ChatBody(p, 2, true)))), 0);
  // Slot ids wrap modulo the slot count, as in llama.cpp: 9 is slot 1 of 4.
  EXPECT_EQ(json::parse(Post(url_ + "/slots/9?action=erase", "").body)["id_slot"], 1);
  EXPECT_EQ(Post(url_ + "/slots/-1?action=erase", "").status, 400);
  EXPECT_EQ(Post(url_ + "/slots/0?action=save", "").status, 400);
}

TEST_F(LlamacppTest, MaxTokensPastTheContextIsCappedNotRefused) {
  std::string words;
  for (int i = 0; i < 4000; ++i) words += "w ";
  Decoded d = Decode(Chat(url_, ChatBody(words, 500, true)));
  EXPECT_EQ(d.finish_reason, "length");
  EXPECT_EQ(d.usage["completion_tokens"], 4096 - 4010);
}

TEST_F(LlamacppTest, MetricsHaveLlamacppNames) {
  Chat(url_, ChatBody("m", 3, true));
  std::string m = Get(url_ + "/metrics").body;
  EXPECT_NE(m.find("llamacpp:requests_processing 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("llamacpp:requests_deferred 0\n"), std::string::npos);
  EXPECT_NE(m.find("llamacpp:prompt_tokens_total 11\n"), std::string::npos);
  EXPECT_NE(m.find("llamacpp:tokens_predicted_total 3\n"), std::string::npos);
}

}  // namespace
}  // namespace capq::sim
