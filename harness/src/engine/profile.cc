#include "capq/engine/profile.h"

#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include "capq/file_io.h"

namespace capq::engine {
namespace {

std::string Where(const std::string& source, const YAML::Mark& mark) {
  // yaml-cpp marks are 0-based; editors count from 1.
  if (mark.is_null()) return source;
  return source + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

template <typename T>
Status ReadScalar(const YAML::Node& node, T* out) {
  if (!node.IsScalar()) return Status::InvalidArgument("expected a scalar value");
  try {
    *out = node.as<T>();
  } catch (const YAML::Exception&) {
    return Status::InvalidArgument("value '" + node.Scalar() + "' has the wrong type");
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(*out)) return Status::InvalidArgument("value must be finite");
  }
  return Status::Ok();
}

using Setter = std::function<Status(const YAML::Node&, EngineProfile*)>;

template <typename T>
Setter Field(T EngineProfile::*member) {
  return [member](const YAML::Node& n, EngineProfile* p) { return ReadScalar(n, &(p->*member)); };
}

const std::vector<std::pair<std::string_view, Setter>>& Fields() {
  static const auto* fields = new std::vector<std::pair<std::string_view, Setter>>{
      {"name", Field(&EngineProfile::name)},
      {"served_model_name", Field(&EngineProfile::served_model_name)},
      {"model_path", Field(&EngineProfile::model_path)},
      {"max_total_tokens", Field(&EngineProfile::max_total_tokens)},
      {"page_size", Field(&EngineProfile::page_size)},
      {"max_running_requests", Field(&EngineProfile::max_running_requests)},
      {"chunked_prefill_size", Field(&EngineProfile::chunked_prefill_size)},
      {"context_length", Field(&EngineProfile::context_length)},
      {"policy",
       [](const YAML::Node& n, EngineProfile* p) {
         std::string v;
         CAPQ_RETURN_IF_ERROR(ReadScalar(n, &v));
         if (v == "prefill_first") {
           p->policy = SchedulePolicy::kPrefillFirst;
         } else if (v == "decode_first") {
           p->policy = SchedulePolicy::kDecodeFirst;
         } else {
           return Status::InvalidArgument("'" + v + "' is not prefill_first or decode_first");
         }
         return Status::Ok();
       }},
      {"mixed_chunks", Field(&EngineProfile::mixed_chunks)},
      {"prefix_cache", Field(&EngineProfile::prefix_cache)},
      {"b0_s", Field(&EngineProfile::b0_s)},
      {"b1_s_per_prefill_token", Field(&EngineProfile::b1_s_per_prefill_token)},
      {"b2_s_per_chunk_token_sq", Field(&EngineProfile::b2_s_per_chunk_token_sq)},
      {"b3_s_per_decode_row", Field(&EngineProfile::b3_s_per_decode_row)},
      {"b4_s_per_decode_kv_token", Field(&EngineProfile::b4_s_per_decode_kv_token)},
      {"overhead_s", Field(&EngineProfile::overhead_s)},
      {"spec_draft_tokens", Field(&EngineProfile::spec_draft_tokens)},
      {"spec_accept_mean", Field(&EngineProfile::spec_accept_mean)},
      {"step_jitter", Field(&EngineProfile::step_jitter)},
      {"jitter_seed", Field(&EngineProfile::jitter_seed)},
      {"epoch_jitter", Field(&EngineProfile::epoch_jitter)},
      {"chat_template_tokens", Field(&EngineProfile::chat_template_tokens)},
      {"template_prefix_tokens", Field(&EngineProfile::template_prefix_tokens)},
      {"eos_min_tokens", Field(&EngineProfile::eos_min_tokens)},
      {"template_bos", Field(&EngineProfile::template_bos)},
      {"chat_turn_tokens", Field(&EngineProfile::chat_turn_tokens)},
      {"cache_model",
       [](const YAML::Node& n, EngineProfile* p) {
         std::string v;
         CAPQ_RETURN_IF_ERROR(ReadScalar(n, &v));
         if (v == "radix") {
           p->cache_model = CacheModel::kRadix;
         } else if (v == "slots") {
           p->cache_model = CacheModel::kSlots;
         } else {
           return Status::InvalidArgument("'" + v + "' is not radix or slots");
         }
         return Status::Ok();
       }},
      {"slot_prompt_similarity", Field(&EngineProfile::slot_prompt_similarity)},
      {"host_prompt_cache", Field(&EngineProfile::host_prompt_cache)},
      {"slot_actions", Field(&EngineProfile::slot_actions)},
      {"idle_start_delay_s", Field(&EngineProfile::idle_start_delay_s)},
      {"stream_interval", Field(&EngineProfile::stream_interval)},
      {"cache_report", Field(&EngineProfile::cache_report)},
      {"prompt_tokens_details", Field(&EngineProfile::prompt_tokens_details)},
      {"metrics", Field(&EngineProfile::metrics)},
  };
  return *fields;
}

}  // namespace

const char* SchedulePolicyName(SchedulePolicy policy) {
  return policy == SchedulePolicy::kPrefillFirst ? "prefill_first" : "decode_first";
}

const char* CacheModelName(CacheModel model) {
  return model == CacheModel::kRadix ? "radix" : "slots";
}

namespace {

// The first key of a profile whose value is out of range, and why.
struct ProfileProblem {
  std::string key, why;
  Status AsStatus() const { return Status::InvalidArgument("key '" + key + "': " + why); }
};

std::optional<ProfileProblem> ProblemOf(const EngineProfile& p) {
  auto bad = [](const char* key, const std::string& why) {
    return std::optional<ProfileProblem>(ProfileProblem{key, why});
  };
  if (p.name.empty()) return bad("name", "must not be empty");
  if (p.page_size < 1) return bad("page_size", "must be >= 1");
  if (p.max_total_tokens < p.page_size) return bad("max_total_tokens", "must be >= page_size");
  if (p.max_running_requests < 1) return bad("max_running_requests", "must be >= 1");
  if (p.chunked_prefill_size < 1) return bad("chunked_prefill_size", "must be >= 1");
  if (p.context_length < 2) return bad("context_length", "must be >= 2");
  const std::pair<const char*, double> costs[] = {
      {"b0_s", p.b0_s},
      {"b1_s_per_prefill_token", p.b1_s_per_prefill_token},
      {"b2_s_per_chunk_token_sq", p.b2_s_per_chunk_token_sq},
      {"b3_s_per_decode_row", p.b3_s_per_decode_row},
      {"b4_s_per_decode_kv_token", p.b4_s_per_decode_kv_token},
      {"overhead_s", p.overhead_s}};
  for (const auto& [key, v] : costs) {
    if (!(v >= 0)) return bad(key, "must be >= 0");
  }
  if (p.b0_s + p.overhead_s <= 0) return bad("b0_s", "b0_s + overhead_s must be > 0");
  if (p.spec_draft_tokens < 0) return bad("spec_draft_tokens", "must be >= 0");
  if (!(p.spec_accept_mean >= 0) || p.spec_accept_mean > p.spec_draft_tokens) {
    return bad("spec_accept_mean", "must be within [0, spec_draft_tokens]");
  }
  if (!(p.step_jitter >= 0 && p.step_jitter < 1)) return bad("step_jitter", "must be in [0, 1)");
  if (!(p.epoch_jitter >= 0 && p.epoch_jitter < 1)) return bad("epoch_jitter", "must be in [0, 1)");
  if (p.chat_template_tokens < 0) return bad("chat_template_tokens", "must be >= 0");
  if (p.template_prefix_tokens < 0 || p.template_prefix_tokens > p.chat_template_tokens) {
    return bad("template_prefix_tokens", "must be within [0, chat_template_tokens]");
  }
  if (p.eos_min_tokens < 1) return bad("eos_min_tokens", "must be >= 1");
  if (p.chat_turn_tokens < 0) return bad("chat_turn_tokens", "must be >= 0");
  if (p.template_bos && p.template_prefix_tokens < 1) {
    return bad("template_bos", "needs template_prefix_tokens >= 1 (the BOS is the first one)");
  }
  if (!(p.idle_start_delay_s >= 0)) return bad("idle_start_delay_s", "must be >= 0");
  if (p.stream_interval < 1) return bad("stream_interval", "must be >= 1");
  if (!(p.slot_prompt_similarity >= 0 && p.slot_prompt_similarity <= 1)) {
    return bad("slot_prompt_similarity", "must be in [0, 1]");
  }
  return std::nullopt;
}

}  // namespace

Status ValidateProfile(const EngineProfile& p) {
  const std::optional<ProfileProblem> problem = ProblemOf(p);
  return problem ? problem->AsStatus() : Status::Ok();
}

Result<EngineProfile> ParseProfile(const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(Where(source, e.mark) + ": YAML syntax: " + e.msg);
  }
  if (!root.IsMap()) {
    return Status::InvalidArgument(Where(source, root.Mark()) +
                                   ": a profile must be a mapping of key: value");
  }
  EngineProfile p;
  std::set<std::string> seen;
  try {
    for (const auto& kv : root) {
      const std::string where = Where(source, kv.first.Mark());
      if (!kv.first.IsScalar()) return Status::InvalidArgument(where + ": keys must be scalars");
      const std::string key = kv.first.Scalar();
      if (!seen.insert(key).second) {
        return Status::InvalidArgument(where + ": key '" + key + "': duplicate key");
      }
      const Setter* setter = nullptr;
      for (const auto& [name, fn] : Fields()) {
        if (name == key) setter = &fn;
      }
      if (setter == nullptr) {
        return Status::InvalidArgument(where + ": key '" + key + "': unknown key");
      }
      Status s = (*setter)(kv.second, &p);
      if (!s.ok()) {
        return Status::InvalidArgument(Where(source, kv.second.Mark()) + ": key '" + key +
                                       "': " + s.message());
      }
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(Where(source, e.mark) + ": " + e.msg);
  }
  if (!seen.count("name")) {
    return Status::InvalidArgument(source + ": key 'name': required key is missing");
  }
  if (const std::optional<ProfileProblem> problem = ProblemOf(p)) {
    // Point at the offending key's line when it is in the file.
    const std::string msg = problem->AsStatus().message();
    try {
      for (const auto& kv : root) {
        if (kv.first.Scalar() == problem->key) {
          return Status::InvalidArgument(Where(source, kv.first.Mark()) + ": " + msg);
        }
      }
    } catch (const YAML::Exception&) {
    }
    return Status::InvalidArgument(source + ": " + msg);
  }
  return p;
}

Result<EngineProfile> LoadProfile(const std::string& path) {
  Result<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status().WithContext("the engine profile");
  return ParseProfile(*text, path);
}

std::string CanonicalProfileJson(const EngineProfile& p) {
  // nlohmann's object is an ordered std::map (sorted keys) and it prints doubles in the shortest
  // form that round-trips, so equal profiles always print the same bytes.
  nlohmann::json j = {
      {"name", p.name},
      {"served_model_name", p.served_model_name},
      {"model_path", p.model_path},
      {"max_total_tokens", p.max_total_tokens},
      {"page_size", p.page_size},
      {"max_running_requests", p.max_running_requests},
      {"chunked_prefill_size", p.chunked_prefill_size},
      {"context_length", p.context_length},
      {"policy", SchedulePolicyName(p.policy)},
      {"mixed_chunks", p.mixed_chunks},
      {"prefix_cache", p.prefix_cache},
      {"b0_s", p.b0_s},
      {"b1_s_per_prefill_token", p.b1_s_per_prefill_token},
      {"b2_s_per_chunk_token_sq", p.b2_s_per_chunk_token_sq},
      {"b3_s_per_decode_row", p.b3_s_per_decode_row},
      {"b4_s_per_decode_kv_token", p.b4_s_per_decode_kv_token},
      {"overhead_s", p.overhead_s},
      {"spec_draft_tokens", p.spec_draft_tokens},
      {"spec_accept_mean", p.spec_accept_mean},
      {"step_jitter", p.step_jitter},
      {"jitter_seed", p.jitter_seed},
      {"epoch_jitter", p.epoch_jitter},
      {"chat_template_tokens", p.chat_template_tokens},
      {"template_prefix_tokens", p.template_prefix_tokens},
      {"eos_min_tokens", p.eos_min_tokens},
  };
  const EngineProfile d;
  if (p.template_bos != d.template_bos) j["template_bos"] = p.template_bos;
  if (p.chat_turn_tokens != d.chat_turn_tokens) j["chat_turn_tokens"] = p.chat_turn_tokens;
  if (p.cache_model != d.cache_model) j["cache_model"] = CacheModelName(p.cache_model);
  if (p.slot_prompt_similarity != d.slot_prompt_similarity) {
    j["slot_prompt_similarity"] = p.slot_prompt_similarity;
  }
  if (p.host_prompt_cache != d.host_prompt_cache) j["host_prompt_cache"] = p.host_prompt_cache;
  if (p.slot_actions != d.slot_actions) j["slot_actions"] = p.slot_actions;
  if (p.idle_start_delay_s != d.idle_start_delay_s) j["idle_start_delay_s"] = p.idle_start_delay_s;
  if (p.stream_interval != d.stream_interval) j["stream_interval"] = p.stream_interval;
  if (p.cache_report != d.cache_report) j["cache_report"] = p.cache_report;
  if (p.prompt_tokens_details != d.prompt_tokens_details) {
    j["prompt_tokens_details"] = p.prompt_tokens_details;
  }
  if (p.metrics != d.metrics) j["metrics"] = p.metrics;
  return j.dump();
}

std::string ProfileDigest(const EngineProfile& p) {
  const std::string canonical = CanonicalProfileJson(p);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  if (EVP_Digest(canonical.data(), canonical.size(), md, &md_len, EVP_sha256(), nullptr) != 1) {
    // Fails closed: an empty-looking digest never matches a pinned one.
    return "sha256:error";
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out = "sha256:";
  for (unsigned int i = 0; i < md_len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 0xf];
  }
  return out;
}

}  // namespace capq::engine
