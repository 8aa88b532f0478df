// What the adapters say of their engines beyond a trial's traffic: the cache settings doctor
// prints, and the control requests capq probe records (targets/control_requests.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "capq/targets/control_requests.h"
#include "capq/targets/target.h"

namespace capq {
namespace {

std::unique_ptr<Target> For(Engine engine, Engine dialect = Engine::kSglang) {
  Identity id;
  id.engine = engine;
  id.sim_dialect = dialect;
  TargetOptions options;
  options.base_url = "http://127.0.0.1:9";
  Result<std::unique_ptr<Target>> t = MakeTarget(id, options);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(*t) : nullptr;
}

TEST(CacheSettings, EachEngineNamesItsOwnCacheFlags) {
  ServerFacts sglang;
  sglang.values = {{"disable_radix_cache", "true"}, {"enable_metrics", "true"}, {"tp_size", "1"}};
  const std::unique_ptr<Target> s = For(Engine::kSglang);
  EXPECT_EQ(s->CacheSettings(sglang),
            (std::vector<std::string>{"disable_radix_cache=true", "enable_metrics=true"}));
  EXPECT_EQ(s->PrefixCacheOff(sglang), "disable_radix_cache=true");
  sglang.values["disable_radix_cache"] = "false";
  EXPECT_EQ(s->PrefixCacheOff(sglang), "");

  ServerFacts vllm;
  vllm.values = {{"enable_prefix_caching", "false"}};
  EXPECT_EQ(For(Engine::kVllm)->PrefixCacheOff(vllm), "enable_prefix_caching=false");
  // An engine that does not name the flag says nothing of it.
  EXPECT_EQ(s->PrefixCacheOff(vllm), "");
}

TEST(CacheSettings,
     LlamacppNamesItsPropsEndpointsAndItsUnreportedHostCacheAndTheSimulatorAsksItsDialect) {
  ServerFacts facts;
  facts.documents["/props"] = {{"endpoint_slots", true}, {"endpoint_metrics", false}};
  const std::string host =
      "host prompt cache: not reported by the server (on unless launched with --cache-ram 0; "
      "8192 MiB by default, common/arg.cpp:1648-1652)";
  const std::vector<std::string> want = {host, "endpoint_slots=true (/props)",
                                         "endpoint_metrics=false (/props)"};
  EXPECT_EQ(For(Engine::kLlamacpp)->CacheSettings(facts), want);
  EXPECT_EQ(For(Engine::kSim, Engine::kLlamacpp)->CacheSettings(facts), want);
  EXPECT_TRUE(For(Engine::kSim, Engine::kSglang)->CacheSettings(facts).empty());
}

TEST(ControlRequests, EachEngineFlushesAndRendersItsOwnWay) {
  const ControlInputs in{"some text", "hello", 3};
  const ControlRequests sglang = ControlRequestsOf(Engine::kSglang, in);
  ASSERT_EQ(sglang.flush.size(), 1u);
  EXPECT_EQ(sglang.flush[0].target, "/flush_cache");
  ASSERT_EQ(sglang.info_fallback.size(), 1u);
  EXPECT_EQ(sglang.info_fallback[0].target, "/get_server_info");
  EXPECT_FALSE(sglang.readiness_note.empty());
  EXPECT_FALSE(sglang.tokenize_rendered);

  const ControlRequests llama = ControlRequestsOf(Engine::kLlamacpp, in);
  ASSERT_EQ(llama.flush.size(), 3u) << "one erase per slot";
  EXPECT_EQ(llama.flush[2].target, "/slots/2?action=erase");
  ASSERT_TRUE(llama.tokenize_rendered);
  const ControlRequest again = llama.tokenize_rendered("<|user|>hello");
  EXPECT_EQ(again.target, "/tokenize");
  EXPECT_NE(again.body.find("\"add_special\":true"), std::string::npos) << again.body;
  ASSERT_EQ(llama.tokenize.size(), 2u);
  EXPECT_NE(llama.tokenize[0].body.find("some text"), std::string::npos);

  EXPECT_EQ(ControlRequestsOf(Engine::kVllm, in).flush.at(0).target, "/reset_prefix_cache");
  EXPECT_TRUE(ControlRequestsOf(Engine::kOpenai, in).info.empty());
}

TEST(ControlRequests, OnlyAnEngineThatReportsABuildHasOne) {
  const nlohmann::json props = {{"build_info", "b10587-3f545be"}};
  EXPECT_EQ(ReportedBuildNumber(Engine::kLlamacpp, "/props", props), 10587);
  EXPECT_EQ(ReportedBuildNumber(Engine::kLlamacpp, "/slots", props), 0);
  EXPECT_EQ(ReportedBuildNumber(Engine::kSglang, "/props", props), 0);
  EXPECT_EQ(ReportedBuildNumber(Engine::kLlamacpp, "/props", {{"build_info", "unknown"}}), 0);
}

}  // namespace
}  // namespace capq
