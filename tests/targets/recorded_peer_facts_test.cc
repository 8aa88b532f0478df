// The SGLang and vLLM adapters' Facts() held to documents real servers sent
// (tests/data/conformance/recorded; its README.md names each file's source and grade). The
// recordings keep the JSON bodies only, so the replay server sends each as a 200 with a
// Content-Length, as uvicorn sends a JSONResponse; the bodies are the files' bytes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "capq/targets/target.h"
#include "replay_server.h"

namespace capq {
namespace {

using replay::ReadRecordedFile;
using replay::RecordedExchange;
using replay::ReplayServer;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

const std::string kDir = std::string(CAPQ_SOURCE_DIR) + "/tests/data/conformance/recorded/";
const char kQwenServerInfo[] = "sglang/sugarcrush-server-info-qwen3.8-TRIMMED.json";
const char kHunyuanModels[] = "sglang/selfllm-hunyuan-a13b-v1-models.json";
const char kKimiModels[] = "vllm/selfllm-kimi-k2.5-v1-models.json";

RecordedExchange JsonAnswer(const std::string& target, const std::string& body) {
  RecordedExchange e;
  e.name = target;
  e.method = "GET";
  e.target = target;
  e.response = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: " +
               std::to_string(body.size()) + "\r\n\r\n" + body;
  return e;
}

RecordedExchange RecordedAnswer(const std::string& target, const std::string& file) {
  return JsonAnswer(target, ReadRecordedFile(kDir + file));
}

std::unique_ptr<Target> Make(Engine e, const ReplayServer& srv) {
  TargetOptions o;
  o.base_url = srv.url();
  o.control_timeout_s = 5;
  auto t = MakeTarget(e, o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(*t);
}

// ---- SGLang ---------------------------------------------------------------------------------

// Qwen3.8's /server_info as its author trimmed it: context_length 1000000 at the top level, and
// internal_states[0] with context_length alone. No /v1/models was recorded with it.
// It has only the top-level max_running_requests 96, the value the command line REQUESTED (sglang
// issue 38846), and no internal_states[0].effective_max_running_requests_per_dp: the adapter
// reports no effective limit, so a row that pins one fails closed rather than pinning 96.
TEST(RecordedSglangPeerAdapter, FactsFromTheRecordedServerInfo) {
  ReplayServer srv({RecordedAnswer("/server_info", kQwenServerInfo)});
  auto t = Make(Engine::kSglang, srv);
  auto f = t->Facts();
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->values["context_length"], "1000000");  // not null on this server
  EXPECT_EQ(f->values["max_total_num_tokens"], "6248064");
  EXPECT_EQ(f->values["chunked_prefill_size"], "16384");
  EXPECT_EQ(f->values["disable_radix_cache"], "false");
  EXPECT_EQ(f->values.count("max_running_requests"), 0u);
  EXPECT_EQ(f->values["enable_cache_report"], "true");
  EXPECT_EQ(f->model_path, "Qwen/Qwen3.8-Flash-Next-FP8");
  EXPECT_EQ(f->version, "0.5.21.dev889+gd8afe1af9");
  EXPECT_TRUE(f->served_models.empty());
  EXPECT_EQ(f->documents["/server_info"],
            nlohmann::json::parse(ReadRecordedFile(kDir + kQwenServerInfo)));
  EXPECT_FALSE(f->sim_identity_digest.has_value());
  EXPECT_THAT(srv.unmatched(), ElementsAre("GET /v1/models"));
}

// Without --context-length SGLang writes server_args' context_length as null; the context in
// force is then /v1/models max_model_len. The two recordings come from different servers (Qwen3.8
// on 0.5.21, Hunyuan-A13B on ~0.4.8): they are put together here, with the recorded
// context_length set to null, to show where the adapter takes the context from.
TEST(RecordedSglangPeerAdapter, NullContextLengthIsTakenFromModels) {
  nlohmann::ordered_json info =
      nlohmann::ordered_json::parse(ReadRecordedFile(kDir + kQwenServerInfo));
  info["context_length"] = nullptr;
  ReplayServer srv(
      {JsonAnswer("/server_info", info.dump(4)), RecordedAnswer("/v1/models", kHunyuanModels)});
  auto t = Make(Engine::kSglang, srv);
  auto f = t->Facts();
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->values["context_length"], "32768");
  EXPECT_THAT(f->served_models, ElementsAre("/root/autodl-fs/Hunyuan-A13B-Instruct"));
  EXPECT_EQ(f->model_path, "Qwen/Qwen3.8-Flash-Next-FP8");  // /server_info's, not /v1/models root
  EXPECT_THAT(srv.unmatched(), ::testing::IsEmpty());
}

// The recorded /v1/models (no parent, no permission) is what the SGLang readiness probe asks.
TEST(RecordedSglangPeerAdapter, ProbeReadsTheRecordedModels) {
  ReplayServer srv({RecordedAnswer("/v1/models", kHunyuanModels)});
  auto t = Make(Engine::kSglang, srv);
  auto probe = t->Probe(NowNs() + 5'000'000'000, nullptr);
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  EXPECT_EQ(*probe, "GET /v1/models");
  EXPECT_THAT(srv.unmatched(), ::testing::IsEmpty());
}

// ---- vLLM -----------------------------------------------------------------------------------

// Kimi-K2.5's /v1/models (vLLM, Feb 2026): max_model_len 8192, root the --model path. Neither
// /version nor /metrics was recorded: Facts() reads what it can and goes on.
TEST(RecordedVllmPeerAdapter, FactsFromTheRecordedModels) {
  ReplayServer srv({RecordedAnswer("/v1/models", kKimiModels)});
  auto t = Make(Engine::kVllm, srv);
  auto f = t->Facts();
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->values["max_model_len"], "8192");
  EXPECT_EQ(f->values.count("version"), 0u);
  EXPECT_EQ(f->model_path, "/root/autodl-fs/moonshotai/Kimi-K2.5");
  EXPECT_THAT(f->served_models, ElementsAre("/root/autodl-fs/moonshotai/Kimi-K2.5"));
  EXPECT_EQ(f->version, "");
  EXPECT_THAT(srv.unmatched(), UnorderedElementsAre("GET /version", "GET /metrics"));
}

}  // namespace
}  // namespace capq
