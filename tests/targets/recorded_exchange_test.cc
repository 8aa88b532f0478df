// The engine adapters held to recorded exchanges: a replay server answers every control request
// with the bytes a server sent (llama.cpp: real recordings from build b9749; SGLang and vLLM:
// fixtures written from their source, see each folder's README.md), and the tests check what each
// adapter reads from them.
//
// The Facts tests assert the values map exactly as the adapters fill it today; they are kept one
// per engine, apart from everything else, so a change of key names touches only those three.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "capq/targets/target.h"
#include "replay_server.h"

namespace capq {
namespace {

using replay::LoadExchange;
using replay::RecordedExchange;
using replay::RecordedRequestBody;
using replay::RecordedResponseBody;
using replay::ReplayServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kData = std::string(CAPQ_SOURCE_DIR) + "/tests/data/conformance/";

std::vector<RecordedExchange> Load(const std::string& engine,
                                   const std::vector<std::string>& names) {
  std::vector<RecordedExchange> out;
  for (const auto& n : names) out.push_back(LoadExchange(kData + engine, n));
  return out;
}

std::unique_ptr<Target> Make(Engine e, const ReplayServer& srv) {
  TargetOptions o;
  o.base_url = srv.url();
  o.control_timeout_s = 5;
  auto t = MakeTarget(e, o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(*t);
}

MonoNs In(double s) { return NowNs() + static_cast<MonoNs>(s * 1e9); }

// The adapter's request body says the same as the recorded one (compared as JSON: the recorder's
// separators differ from nlohmann's).
void ExpectSameJsonBody(const replay::SeenRequest& sent, const RecordedExchange& recorded) {
  EXPECT_EQ(nlohmann::json::parse(sent.body), nlohmann::json::parse(RecordedRequestBody(recorded)))
      << recorded.name;
}

// ---- llama.cpp (real recordings, build b9749) ---------------------------------------------------

// 01: 503 "Loading model" with Connection: close; 02: 200 {"status":"ok"} once loaded.
TEST(RecordedLlamacppAdapter, ProbeWaitsThroughTheLoading503) {
  ReplayServer srv(Load("llamacpp", {"01-health-loading", "02-health-ready"}));
  auto t = Make(Engine::kLlamacpp, srv);
  auto probe = t->Probe(In(5), nullptr);
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  EXPECT_EQ(*probe, "GET /health");
  EXPECT_EQ(srv.count("GET /health"), 2);
  EXPECT_THAT(srv.unmatched(), ::testing::IsEmpty());
}

TEST(RecordedLlamacppAdapter, FactsFromPropsAndModels) {
  ReplayServer srv(Load("llamacpp", {"04-props", "03-v1-models"}));
  auto t = Make(Engine::kLlamacpp, srv);
  auto f = t->Facts();
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  // llama.cpp's own names: /props total_slots 8, default_generation_settings.n_ctx 2048 (per
  // slot: -c 16384 / -np 8), build_info; /v1/models data[0].meta.
  EXPECT_EQ(f->values, (std::map<std::string, std::string>{{"total_slots", "8"},
                                                           {"n_ctx", "2048"},
                                                           {"n_ctx_train", "32768"},
                                                           {"n_vocab", "32064"},
                                                           {"n_params", "19826944"},
                                                           {"build_info", "b9749-d32676d77"}}));
  EXPECT_EQ(f->model_path, "/opt/models/gguf/v1/tiny-llama-phi3vocab-f32.gguf");
  EXPECT_EQ(f->version, "b9749-d32676d77");
  EXPECT_EQ(f->served_models, std::vector<std::string>{"tiny-llama"});
  EXPECT_TRUE(f->documents.contains("/props"));
  EXPECT_TRUE(f->documents.contains("/v1/models"));
  EXPECT_THAT(srv.unmatched(), ::testing::IsEmpty());
}

// 35-*: every erase answered 200 {"id_slot":N,"n_erased":M}.
TEST(RecordedLlamacppAdapter, FlushErasesEverySlotTheRecordedPropsReport) {
  std::vector<std::string> names = {"04-props"};
  for (int i = 0; i < 8; ++i) names.push_back("35-cache-c1-erase-slot" + std::to_string(i));
  ReplayServer srv(Load("llamacpp", names));
  auto t = Make(Engine::kLlamacpp, srv);
  auto f = t->Flush(In(5), nullptr);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->attempts, 8);
  // Erase leaves the host-memory prompt cache (recordings 37-40): the 200s prove nothing.
  EXPECT_EQ(f->note.rfind("erased 8 slot(s); the host-memory prompt cache", 0), 0u) << f->note;
  EXPECT_TRUE(f->status_proves_nothing);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(srv.count("POST /slots/" + std::to_string(i) + "?action=erase"), 1) << i;
  }
  EXPECT_THAT(srv.unmatched(), ::testing::IsEmpty());
}

// 94: a server started without --slot-save-path refuses every slot action with 501.
TEST(RecordedLlamacppAdapter, FlushWithoutSlotSavePathNamesTheFlag) {
  ReplayServer srv(Load("llamacpp", {"04-props", "94-nss-erase-slot0"}));
  auto t = Make(Engine::kLlamacpp, srv);
  auto f = t->Flush(In(5), nullptr);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(f.status().message(), HasSubstr("--slot-save-path"));
  EXPECT_THAT(f.status().message(), HasSubstr("501"));
  EXPECT_EQ(srv.count("POST /slots/0?action=erase"), 1);  // no retry of a refusal
}

// 07: POST /tokenize {"content", "add_special": false} -> 9 ids, no BOS.
TEST(RecordedLlamacppAdapter, TokenCountAndIdsFromTheRecordedTokenize) {
  const auto ex = Load("llamacpp", {"07-tokenize-add_special-false"});
  ReplayServer srv(ex);
  auto t = Make(Engine::kLlamacpp, srv);
  const std::string text = "Hello world! The quick brown fox.";
  auto n = t->CountTokens(text);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 9);
  auto ids = t->TokenIds(text);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(*ids, (std::vector<int64_t>{15043, 3186, 29991, 450, 4996, 17354, 1701, 29916, 29889}));
  for (const auto& s : srv.seen()) ExpectSameJsonBody(s, ex[0]);
}

// 21: /metrics 600 ms after 12 streams hit 8 slots; 06: the idle server.
TEST(RecordedLlamacppAdapter, LoadFromTheRecordedMetrics) {
  const auto ex = Load("llamacpp", {"21-load12-metrics", "06-metrics-idle"});
  ReplayServer srv({ex[1]});
  auto t = Make(Engine::kLlamacpp, srv);
  ServerLoad busy = t->ParseLoad(RecordedResponseBody(ex[0]));
  EXPECT_EQ(busy.running, 8);
  EXPECT_EQ(busy.waiting, 4);

  auto m = t->Metrics();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ServerLoad idle = t->ParseLoad(*m);
  EXPECT_EQ(idle.running, 0);
  EXPECT_EQ(idle.waiting, 0);
  auto w = t->WaitIdle(In(2), nullptr);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(*w, "idle after 1 /metrics poll(s)");
  EXPECT_FALSE(t->ParseCachedTokens(*m).has_value());  // llama.cpp counts no cache hits there
}

// ---- SGLang (fixtures from source, main 8905cbd42) ----------------------------------------------

TEST(RecordedSglangAdapter, ProbeAsksModelsNeverTheGeneratingHealth) {
  ReplayServer srv(Load("sglang", {"01-health-starting", "03-v1-models"}));
  auto t = Make(Engine::kSglang, srv);
  auto probe = t->Probe(In(5), nullptr);
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  EXPECT_EQ(*probe, "GET /v1/models");
  EXPECT_EQ(srv.count("GET /health"), 0);
}

TEST(RecordedSglangAdapter, FactsFromServerInfoAndModels) {
  ReplayServer srv(Load("sglang", {"04-server-info", "03-v1-models"}));
  auto t = Make(Engine::kSglang, srv);
  auto f = t->Facts();
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->values, (std::map<std::string, std::string>{
                           // internal_states[0].effective_max_running_requests_per_dp x dp_size,
                           // not server_args' requested 64.
                           {"max_running_requests", "48"},
                           {"max_total_num_tokens", "96000"},
                           // server_args.context_length is null unless given: /v1/models.
                           {"context_length", "40960"},
                           {"chunked_prefill_size", "8192"},
                           {"speculative_algorithm", "EAGLE"},
                           {"speculative_num_steps", "3"},
                           {"speculative_eagle_topk", "1"},
                           {"speculative_num_draft_tokens", "4"},
                           {"page_size", "1"},
                           {"tp_size", "1"},
                           {"dp_size", "1"},
                           {"disable_radix_cache", "false"},
                           {"max_prefill_tokens", "16384"},
                           {"schedule_policy", "fcfs"},
                           {"enable_cache_report", "true"},
                           {"enable_metrics", "true"}}));
  EXPECT_EQ(f->model_path, "/models/Qwen3-8B");  // /server_info; /v1/models root is the name
  EXPECT_EQ(f->version, "0.5.15.post1");
  EXPECT_EQ(f->served_models, std::vector<std::string>{"qwen3-8b"});
  EXPECT_FALSE(f->sim_identity_digest.has_value());
  EXPECT_THAT(srv.unmatched(), ::testing::IsEmpty());
}

// Builds before 25acbbc61 (#13273, 2025-11-17) serve the document only at /get_server_info; here
// the same recorded answer is moved there, and /server_info gets the replay server's 404.
TEST(RecordedSglangAdapter, FactsFallBackToGetServerInfo) {
  auto ex = Load("sglang", {"04-server-info", "03-v1-models"});
  ex[0].target = "/get_server_info";
  ReplayServer srv(ex);
  auto t = Make(Engine::kSglang, srv);
  auto f = t->Facts();
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(f->documents.contains("/get_server_info"));
  EXPECT_EQ(f->version, "0.5.15.post1");
  EXPECT_THAT(srv.unmatched(), ElementsAre("GET /server_info"));
}

// 05: busy -> 400 "Flush cache failed.\n"; 06: idle -> 200.
TEST(RecordedSglangAdapter, FlushRetriesTheBusy400) {
  ReplayServer srv(Load("sglang", {"05-flush-cache-busy", "06-flush-cache-ok"}));
  auto t = Make(Engine::kSglang, srv);
  auto f = t->Flush(In(5), nullptr);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->attempts, 2);
  EXPECT_EQ(f->note, "flushed after 1 busy refusal(s)");
}

// Builds before #21490 answered a busy flush with 400 and the SUCCESS text: only the status tells.
TEST(RecordedSglangAdapter, FlushReadsTheStatusNotTheText) {
  ReplayServer srv(Load("sglang", {"07-flush-cache-busy-before-21490", "06-flush-cache-ok"}));
  auto t = Make(Engine::kSglang, srv);
  auto f = t->Flush(In(5), nullptr);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->attempts, 2);
}

TEST(RecordedSglangAdapter, FlushBusyUntilTheDeadlineFails) {
  ReplayServer srv(Load("sglang", {"05-flush-cache-busy"}));
  auto t = Make(Engine::kSglang, srv);
  auto f = t->Flush(In(0.5), nullptr);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(f.status().message(), HasSubstr("HTTP 400 (busy)"));
}

// 08: POST /tokenize {"prompt", "add_special_tokens": false} -> {"tokens","count","max_model_len"}.
TEST(RecordedSglangAdapter, TokenCountAndIdsFromTheTokenizeAnswer) {
  const auto ex = Load("sglang", {"08-tokenize-prompt"});
  ReplayServer srv(ex);
  auto t = Make(Engine::kSglang, srv);
  auto n = t->CountTokens("Say hi");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 2);
  auto ids = t->TokenIds("Say hi");
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_THAT(*ids, ElementsAre(25699, 15588));
  for (const auto& s : srv.seen()) ExpectSameJsonBody(s, ex[0]);
}

// ---- vLLM (fixtures from source, v0.16.0) -------------------------------------------------------

// vLLM's HTTP server starts after the engine: /health is 503 only when the engine died.
TEST(RecordedVllmAdapter, ProbeWaitsThroughA503) {
  ReplayServer srv(Load("vllm", {"02-health-engine-dead", "01-health-ready"}));
  auto t = Make(Engine::kVllm, srv);
  auto probe = t->Probe(In(5), nullptr);
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  EXPECT_EQ(*probe, "GET /health");
  EXPECT_EQ(srv.count("GET /health"), 2);
}

TEST(RecordedVllmAdapter, FactsFromModelsAndVersion) {
  ReplayServer srv(Load("vllm", {"03-v1-models", "04-version", "10-metrics"}));
  auto t = Make(Engine::kVllm, srv);
  auto f = t->Facts();
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  // max_num_seqs is not on /v1/models (only /server_info in dev mode reports it); the KV pool is
  // in the labels of vllm:cache_config_info.
  EXPECT_EQ(f->values, (std::map<std::string, std::string>{{"max_model_len", "32768"},
                                                           {"version", "0.16.0"},
                                                           {"num_gpu_blocks", "2275"},
                                                           {"block_size", "16"},
                                                           {"enable_prefix_caching", "true"},
                                                           {"cache_dtype", "auto"}}));
  EXPECT_EQ(f->model_path, "/models/Qwen3-8B");  // root = --model
  EXPECT_EQ(f->version, "0.16.0");
  EXPECT_EQ(f->served_models, std::vector<std::string>{"qwen3-8b"});
  EXPECT_THAT(srv.unmatched(), ::testing::IsEmpty());
}

// 07: dev mode, 200 with an empty body whatever happened.
TEST(RecordedVllmAdapter, FlushIs200ThatProvesNothing) {
  ReplayServer srv(Load("vllm", {"07-reset-prefix-cache"}));
  auto t = Make(Engine::kVllm, srv);
  auto f = t->Flush(In(5), nullptr);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(f->status_proves_nothing);
  EXPECT_EQ(f->attempts, 1);
}

// 08: without VLLM_SERVER_DEV_MODE=1 the route does not exist (FastAPI's 404).
TEST(RecordedVllmAdapter, FlushWithoutDevModeNamesTheVariable) {
  ReplayServer srv(Load("vllm", {"08-reset-prefix-cache-no-dev-mode"}));
  auto t = Make(Engine::kVllm, srv);
  auto f = t->Flush(In(5), nullptr);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(f.status().message(), HasSubstr("VLLM_SERVER_DEV_MODE=1"));
}

// 09: newer builds say {"success": false} in a 200 when blocks are still held: the flush is
// retried like SGLang's busy 400, and refused at the deadline.
TEST(RecordedVllmAdapter, NewerFlushAnswerSayingFailureIsRetriedThenRefused) {
  ReplayServer srv(Load("vllm", {"09-reset-prefix-cache-newer-busy"}));
  auto t = Make(Engine::kVllm, srv);
  auto f = t->Flush(In(0.5), nullptr);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(f.status().message(), HasSubstr("{\"success\": false}"));
  EXPECT_GE(srv.count("POST /reset_prefix_cache"), 2);
}

// 05: POST /tokenize {"prompt", "add_special_tokens": false} -> {"count","max_model_len","tokens"}.
TEST(RecordedVllmAdapter, TokenCountAndIdsFromTheTokenizeAnswer) {
  const auto ex = Load("vllm", {"05-tokenize-prompt"});
  ReplayServer srv(ex);
  auto t = Make(Engine::kVllm, srv);
  auto n = t->CountTokens("Say hi");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 2);
  auto ids = t->TokenIds("Say hi");
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_THAT(*ids, ElementsAre(25699, 15588));
  for (const auto& s : srv.seen()) ExpectSameJsonBody(s, ex[0]);
}

TEST(RecordedVllmAdapter, LoadAndCacheHitsFromMetrics) {
  ReplayServer srv(Load("vllm", {"10-metrics"}));
  auto t = Make(Engine::kVllm, srv);
  auto m = t->Metrics();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ServerLoad load = t->ParseLoad(*m);
  EXPECT_EQ(load.running, 3);
  EXPECT_EQ(load.waiting, 2);
  EXPECT_EQ(t->ParseCachedTokens(*m), 4096);
  // The info gauge's labels carry the KV pool size; capq does not read them yet.
  EXPECT_THAT(*m, HasSubstr("num_gpu_blocks=\"2275\""));
}

// ---- the replay server itself ----------------------------------------------------------------

TEST(ReplayServer, WritesTheRecordedBytesVerbatim) {
  const auto ex = Load("llamacpp", {"04-props"});
  ReplayServer srv(ex);
  auto t = Make(Engine::kLlamacpp, srv);
  auto m = t->Metrics();  // not recorded: a 404, listed as unmatched
  EXPECT_FALSE(m.ok());
  EXPECT_THAT(srv.unmatched(), ElementsAre("GET /metrics"));
  auto f = t->Facts();  // /v1/models is unmatched too, and Facts() tolerates that
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->documents["/props"], nlohmann::json::parse(RecordedResponseBody(ex[0])));
}

}  // namespace
}  // namespace capq
