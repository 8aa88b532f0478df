// Profile loading (strict, errors that point at the line and key) and the identity digest.
#include "capq/engine/profile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

namespace capq::engine {
namespace {

using ::testing::HasSubstr;

const std::string kMinimal = "name: t\n";

std::string ProfilesDir() { return std::string(CAPQ_SOURCE_DIR) + "/rows/sim/profiles"; }

TEST(ProfileTest, RepositoryProfilesLoadAndNameThemselves) {
  for (const char* name : {"small", "small_jitter", "b70_twin"}) {
    auto p = LoadProfile(ProfilesDir() + "/" + name + ".yaml");
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->name, name);
    EXPECT_TRUE(ValidateProfile(*p).ok());
  }
}

TEST(ProfileTest, B70TwinCarriesTheLaunchLimits) {
  auto p = LoadProfile(ProfilesDir() + "/b70_twin.yaml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->max_total_tokens, 262144);
  EXPECT_EQ(p->max_running_requests, 9);
  EXPECT_EQ(p->chunked_prefill_size, 4096);
  EXPECT_EQ(p->page_size, 64);
  EXPECT_EQ(p->policy, SchedulePolicy::kPrefillFirst);
  EXPECT_EQ(p->spec_draft_tokens, 7);
}

TEST(ProfileTest, SmallJitterDiffersFromSmallOnlyInNoise) {
  auto small = LoadProfile(ProfilesDir() + "/small.yaml");
  auto jitter = LoadProfile(ProfilesDir() + "/small_jitter.yaml");
  ASSERT_TRUE(small.ok() && jitter.ok());
  EXPECT_GT(jitter->step_jitter, 0);
  EXPECT_GT(jitter->epoch_jitter, 0);
  EngineProfile j = *jitter;
  j.name = small->name;
  j.step_jitter = small->step_jitter;
  j.epoch_jitter = small->epoch_jitter;
  j.jitter_seed = small->jitter_seed;
  EXPECT_EQ(CanonicalProfileJson(j), CanonicalProfileJson(*small));
}

TEST(ProfileTest, ParsesEveryKey) {
  const std::string yaml = R"(name: x
served_model_name: m
model_path: /m
max_total_tokens: 1000
page_size: 10
max_running_requests: 3
chunked_prefill_size: 100
context_length: 900
policy: decode_first
mixed_chunks: true
prefix_cache: false
b0_s: 0.1
b1_s_per_prefill_token: 0.2
b2_s_per_chunk_token_sq: 0.3
b3_s_per_decode_row: 0.4
b4_s_per_decode_kv_token: 0.5
overhead_s: 0.6
spec_draft_tokens: 4
spec_accept_mean: 1.5
step_jitter: 0.1
jitter_seed: 99
epoch_jitter: 0.2
chat_template_tokens: 7
template_prefix_tokens: 2
eos_min_tokens: 5
)";
  auto p = ParseProfile(yaml, "x.yaml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->served_model_name, "m");
  EXPECT_EQ(p->model_path, "/m");
  EXPECT_EQ(p->max_total_tokens, 1000);
  EXPECT_EQ(p->page_size, 10);
  EXPECT_EQ(p->max_running_requests, 3);
  EXPECT_EQ(p->chunked_prefill_size, 100);
  EXPECT_EQ(p->context_length, 900);
  EXPECT_EQ(p->policy, SchedulePolicy::kDecodeFirst);
  EXPECT_TRUE(p->mixed_chunks);
  EXPECT_FALSE(p->prefix_cache);
  EXPECT_DOUBLE_EQ(p->b0_s, 0.1);
  EXPECT_DOUBLE_EQ(p->b1_s_per_prefill_token, 0.2);
  EXPECT_DOUBLE_EQ(p->b2_s_per_chunk_token_sq, 0.3);
  EXPECT_DOUBLE_EQ(p->b3_s_per_decode_row, 0.4);
  EXPECT_DOUBLE_EQ(p->b4_s_per_decode_kv_token, 0.5);
  EXPECT_DOUBLE_EQ(p->overhead_s, 0.6);
  EXPECT_EQ(p->spec_draft_tokens, 4);
  EXPECT_DOUBLE_EQ(p->spec_accept_mean, 1.5);
  EXPECT_DOUBLE_EQ(p->step_jitter, 0.1);
  EXPECT_EQ(p->jitter_seed, 99u);
  EXPECT_DOUBLE_EQ(p->epoch_jitter, 0.2);
  EXPECT_EQ(p->chat_template_tokens, 7);
  EXPECT_EQ(p->template_prefix_tokens, 2);
  EXPECT_EQ(p->eos_min_tokens, 5);
}

struct BadCase {
  const char* label;
  std::string yaml;
  std::string want_location;  // "file:line:column" or "file:line"
  std::string want_text;
};

TEST(ProfileTest, ErrorsNameTheFileLineAndKey) {
  const BadCase cases[] = {
      {"unknown key", "name: t\npage_size: 64\nmax_runing_requests: 9\n", "p.yaml:3:1",
       "key 'max_runing_requests': unknown key"},
      {"wrong type", "name: t\npage_size: sixty\n", "p.yaml:2:12", "key 'page_size'"},
      {"fraction for an integer", "name: t\nmax_total_tokens: 1.5\n", "p.yaml:2:19",
       "key 'max_total_tokens'"},
      {"bad policy", "name: t\npolicy: fastest\n", "p.yaml:2:9", "key 'policy'"},
      {"mapping for a scalar", "name: t\nb0_s:\n  a: 1\n", "p.yaml:3:3", "key 'b0_s'"},
      {"duplicate", "name: t\npage_size: 1\npage_size: 2\n", "p.yaml:3:1",
       "key 'page_size': duplicate key"},
      {"out of range", "name: t\n\nb1_s_per_prefill_token: -1\n", "p.yaml:3:1",
       "key 'b1_s_per_prefill_token': must be >= 0"},
      {"accept above drafts", "name: t\nspec_draft_tokens: 2\nspec_accept_mean: 3\n", "p.yaml:3:1",
       "key 'spec_accept_mean'"},
      {"jitter of one", "name: t\nstep_jitter: 1.0\n", "p.yaml:2:1", "key 'step_jitter'"},
      {"syntax", "name: t\npage_size: [1, 2\n", "p.yaml:", "YAML syntax"},
      {"missing name", "page_size: 64\n", "p.yaml", "key 'name': required key is missing"},
      {"not a mapping", "- a\n- b\n", "p.yaml:1:1", "mapping"},
  };
  for (const BadCase& c : cases) {
    auto p = ParseProfile(c.yaml, "p.yaml");
    ASSERT_FALSE(p.ok()) << c.label;
    EXPECT_EQ(p.status().code(), Status::Code::kInvalidArgument) << c.label;
    EXPECT_THAT(p.status().message(), HasSubstr(c.want_location)) << c.label;
    EXPECT_THAT(p.status().message(), HasSubstr(c.want_text)) << c.label;
  }
}

TEST(ProfileTest, LoadProfileNamesThePath) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/capq_profile_test_bad.yaml";
  {
    std::ofstream out(path);
    out << "name: t\nbogus: 1\n";
  }
  auto p = LoadProfile(path);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr(path + ":2:1: key 'bogus'"));
  std::filesystem::remove(path);

  auto missing = LoadProfile(dir + "/capq_profile_test_does_not_exist.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
}

TEST(ProfileTest, CanonicalJsonHasEveryFieldSortedAndStable) {
  auto p = ParseProfile(kMinimal, "m.yaml");
  ASSERT_TRUE(p.ok());
  const std::string a = CanonicalProfileJson(*p);
  EXPECT_EQ(a, CanonicalProfileJson(*p));
  auto j = nlohmann::json::parse(a);
  EXPECT_EQ(j.size(), 25u);
  std::string prev;
  for (auto it = j.begin(); it != j.end(); ++it) {
    EXPECT_LT(prev, it.key());
    prev = it.key();
  }
  // The canonical text's key order is its byte order, not just nlohmann's iteration order.
  EXPECT_LT(a.find("\"b0_s\""), a.find("\"b1_s_per_prefill_token\""));
  EXPECT_LT(a.find("\"step_jitter\""), a.find("\"template_prefix_tokens\""));
  EXPECT_EQ(j["policy"], "prefill_first");
  EXPECT_EQ(j["b1_s_per_prefill_token"], 2.5e-4);
}

TEST(ProfileTest, DigestChangesWhenAnyFieldChanges) {
  const EngineProfile base = *ParseProfile(kMinimal, "m.yaml");
  const std::string base_digest = ProfileDigest(base);
  ASSERT_EQ(base_digest.rfind("sha256:", 0), 0u);
  ASSERT_EQ(base_digest.size(), 7u + 64u);
  EXPECT_EQ(ProfileDigest(base), base_digest);

  const std::vector<std::function<void(EngineProfile&)>> edits = {
      [](EngineProfile& p) { p.name += "x"; },
      [](EngineProfile& p) { p.served_model_name += "x"; },
      [](EngineProfile& p) { p.model_path += "x"; },
      [](EngineProfile& p) { p.max_total_tokens += 1; },
      [](EngineProfile& p) { p.page_size += 1; },
      [](EngineProfile& p) { p.max_running_requests += 1; },
      [](EngineProfile& p) { p.chunked_prefill_size += 1; },
      [](EngineProfile& p) { p.context_length += 1; },
      [](EngineProfile& p) { p.policy = SchedulePolicy::kDecodeFirst; },
      [](EngineProfile& p) { p.mixed_chunks = !p.mixed_chunks; },
      [](EngineProfile& p) { p.prefix_cache = !p.prefix_cache; },
      [](EngineProfile& p) { p.b0_s *= 1.0000001; },
      [](EngineProfile& p) { p.b1_s_per_prefill_token *= 1.0000001; },
      [](EngineProfile& p) { p.b2_s_per_chunk_token_sq += 1e-12; },
      [](EngineProfile& p) { p.b3_s_per_decode_row *= 1.0000001; },
      [](EngineProfile& p) { p.b4_s_per_decode_kv_token *= 1.0000001; },
      [](EngineProfile& p) { p.overhead_s *= 1.0000001; },
      [](EngineProfile& p) { p.spec_draft_tokens += 1; },
      [](EngineProfile& p) { p.spec_accept_mean += 0.5; },
      [](EngineProfile& p) { p.step_jitter += 0.01; },
      [](EngineProfile& p) { p.jitter_seed += 1; },
      [](EngineProfile& p) { p.epoch_jitter += 0.01; },
      [](EngineProfile& p) { p.chat_template_tokens += 1; },
      [](EngineProfile& p) { p.template_prefix_tokens += 1; },
      [](EngineProfile& p) { p.eos_min_tokens += 1; },
  };
  // One edit per canonical field: if a field is added to the profile, this list must grow.
  EXPECT_EQ(edits.size(), nlohmann::json::parse(CanonicalProfileJson(base)).size());
  std::set<std::string> digests = {base_digest};
  for (size_t i = 0; i < edits.size(); ++i) {
    EngineProfile p = base;
    edits[i](p);
    EXPECT_TRUE(digests.insert(ProfileDigest(p)).second) << "edit " << i << " left the digest";
  }
}

TEST(ProfileTest, LlamacppKeysParseAndEnterTheDigestOnlyWhenSet) {
  auto p = ParseProfile(
      "name: t\ncache_model: slots\nslot_prompt_similarity: 0.5\nhost_prompt_cache: false\n"
      "slot_actions: false\ntemplate_bos: true\nidle_start_delay_s: 0.004\n",
      "l.yaml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->cache_model, CacheModel::kSlots);
  EXPECT_EQ(p->slot_prompt_similarity, 0.5);
  EXPECT_FALSE(p->host_prompt_cache);
  EXPECT_FALSE(p->slot_actions);
  EXPECT_TRUE(p->template_bos);
  auto j = nlohmann::json::parse(CanonicalProfileJson(*p));
  EXPECT_EQ(j["cache_model"], "slots");
  EXPECT_EQ(j.size(), 31u);
  EXPECT_EQ(j["idle_start_delay_s"], 0.004);
  // Spelled out at their defaults they leave the canonical text, and so every pinned digest, as is.
  auto d = ParseProfile(
      "name: t\ncache_model: radix\nslot_prompt_similarity: 0.1\nhost_prompt_cache: true\n"
      "slot_actions: true\ntemplate_bos: false\nidle_start_delay_s: 0\n",
      "d.yaml");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(CanonicalProfileJson(*d), CanonicalProfileJson(*ParseProfile(kMinimal, "m.yaml")));
  EXPECT_THAT(ParseProfile("name: t\ncache_model: paged\n", "b.yaml").status().message(),
              HasSubstr("not radix or slots"));
  EXPECT_THAT(ParseProfile("name: t\ntemplate_prefix_tokens: 0\ntemplate_bos: true\n", "b.yaml")
                  .status()
                  .message(),
              HasSubstr("template_bos"));
}

TEST(ProfileTest, ChatTurnTokensParseAndEnterTheDigestOnlyWhenSet) {
  auto base = ParseProfile(kMinimal, "m.yaml");
  ASSERT_TRUE(base.ok());
  EXPECT_EQ(base->chat_turn_tokens, 5);
  auto p = ParseProfile("name: t\nchat_turn_tokens: 4\n", "t.yaml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->chat_turn_tokens, 4);
  EXPECT_EQ(nlohmann::json::parse(CanonicalProfileJson(*p))["chat_turn_tokens"], 4);
  EXPECT_NE(ProfileDigest(*p), ProfileDigest(*base));
  auto d = ParseProfile("name: t\nchat_turn_tokens: 5\n", "d.yaml");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(CanonicalProfileJson(*d), CanonicalProfileJson(*base));
  EXPECT_THAT(ParseProfile("name: t\nchat_turn_tokens: -1\n", "b.yaml").status().message(),
              HasSubstr("chat_turn_tokens"));
}

TEST(ProfileTest, DigestOfTheDefaultProfileIsPinned) {
  // A change to the canonical form changes the identity of every pinned sim row; this golden value
  // (sha256sum of the canonical text) makes such a change deliberate.
  EngineProfile p = *ParseProfile(kMinimal, "m.yaml");
  EXPECT_EQ(ProfileDigest(p),
            "sha256:0403e77a55b2029389fc1b68e7bf94faa7324950aac6936db96bcf24837a44b7");
}

}  // namespace
}  // namespace capq::engine
