#include "capq/targets/engine_shape.h"

#include <cstdlib>

namespace capq {
namespace {

using engine::Basis;
using engine::Parameter;
using engine::ServerShape;

// The limit `key` as a whole number, or nullopt when absent or not one.
std::optional<int64_t> Count(const std::map<std::string, std::string>& limits,
                             const std::string& key) {
  auto it = limits.find(key);
  if (it == limits.end() || it->second.empty()) return std::nullopt;
  char* end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (*end != '\0' || v < 0) return std::nullopt;
  return v;
}

bool Flag(const std::map<std::string, std::string>& limits, const std::string& key, bool dflt) {
  auto it = limits.find(key);
  return it == limits.end() ? dflt : it->second == "true";
}

// Sets `*field` from the reported `key`, or to `dflt` (assumed, `why`) when it is not reported.
template <typename T>
void Take(const std::map<std::string, std::string>& limits, const std::string& key, T dflt,
          const char* field, const std::string& why, T* out, ServerShape* s) {
  if (auto v = Count(limits, key)) {
    *out = static_cast<T>(*v);
    s->facts.push_back({field, static_cast<double>(*out), Basis::kReported, key});
  } else {
    *out = dflt;
    s->facts.push_back({field, static_cast<double>(dflt), Basis::kAssumed, why});
  }
}

void Structural(const char* field, double value, const std::string& how, ServerShape* s) {
  s->facts.push_back({field, value, Basis::kReported, how});
}

Result<ServerShape> Sglang(const std::map<std::string, std::string>& l) {
  ServerShape s;
  engine::EngineProfile& p = s.profile;
  auto running = Count(l, "max_running_requests");
  if (!running || *running < 1) {
    return Status::InvalidArgument(
        "SGLang's max_running_requests is not reported: the model "
        "cannot know how many requests run at once");
  }
  p.max_running_requests = static_cast<int>(*running);
  Structural("max_running_requests", p.max_running_requests,
             "max_running_requests (the allocator's effective limit)", &s);
  Take(l, "max_total_num_tokens", p.max_total_tokens, "max_total_tokens",
       "not reported: the pool is left unbounded", &p.max_total_tokens, &s);
  Take(l, "page_size", 1, "page_size", "not reported: SGLang's default page size 1", &p.page_size,
       &s);
  Take(l, "chunked_prefill_size", int64_t{4096}, "chunked_prefill_size",
       "not reported: SGLang's default for an unknown GPU (server-apis.md section 7)",
       &p.chunked_prefill_size, &s);
  Take(l, "context_length", p.context_length, "context_length", "not reported", &p.context_length,
       &s);
  Take(l, "speculative_num_steps", 0, "spec_draft_tokens", "not reported: no speculative decoding",
       &p.spec_draft_tokens, &s);
  p.policy = engine::SchedulePolicy::kPrefillFirst;
  p.mixed_chunks = false;
  p.prefix_cache = !Flag(l, "disable_radix_cache", false);
  Structural("prefill_first", 1, "mixed chunks off (SGLang's get_next_batch_to_run)", &s);
  return s;
}

Result<ServerShape> Vllm(const std::map<std::string, std::string>& l) {
  ServerShape s;
  engine::EngineProfile& p = s.profile;
  Take(l, "block_size", 16, "page_size", "not reported: vLLM's default block size 16", &p.page_size,
       &s);
  if (auto blocks = Count(l, "num_gpu_blocks")) {
    p.max_total_tokens = *blocks * p.page_size;
    Structural("max_total_tokens", static_cast<double>(p.max_total_tokens),
               "num_gpu_blocks x block_size", &s);
  }
  Take(l, "max_model_len", p.context_length, "context_length", "not reported", &p.context_length,
       &s);
  p.max_running_requests = 256;
  s.facts.push_back({"max_running_requests", 256, Basis::kAssumed,
                     "max_num_seqs is not reported: vLLM's default 256"});
  p.chunked_prefill_size = 2048;
  s.facts.push_back({"chunked_prefill_size", 2048, Basis::kAssumed,
                     "max_num_batched_tokens is not reported: vLLM's API-server default 2048"});
  p.policy = engine::SchedulePolicy::kDecodeFirst;
  p.mixed_chunks = true;
  p.prefix_cache = Flag(l, "enable_prefix_caching", true);
  Structural("decode_first", 1,
             "decode rows first, the rest of the budget prefill (chunked prefill)", &s);
  return s;
}

Result<ServerShape> Llamacpp(const std::map<std::string, std::string>& l) {
  ServerShape s;
  engine::EngineProfile& p = s.profile;
  auto slots = Count(l, "total_slots");
  if (!slots || *slots < 1) {
    return Status::InvalidArgument(
        "llama.cpp's total_slots is not reported (/props): the model "
        "cannot know how many requests run at once");
  }
  p.max_running_requests = static_cast<int>(*slots);
  Structural("max_running_requests", p.max_running_requests, "total_slots (-np)", &s);
  Take(l, "n_ctx", p.context_length, "context_length", "not reported", &p.context_length, &s);
  p.cache_model = engine::CacheModel::kSlots;
  p.max_total_tokens = p.context_length * p.max_running_requests;
  p.page_size = 1;
  p.chunked_prefill_size = 2048;
  s.facts.push_back({"chunked_prefill_size", 2048, Basis::kAssumed,
                     "n_batch is not reported: llama.cpp's default 2048"});
  p.policy = engine::SchedulePolicy::kDecodeFirst;
  p.mixed_chunks = false;
  p.host_prompt_cache = false;
  Structural("decode_first", 1, "every llama_decode() carries all decode rows, then prompt tokens",
             &s);
  return s;
}

}  // namespace

Result<ServerShape> ShapeFromLimits(Engine engine,
                                    const std::map<std::string, std::string>& limits) {
  if (engine != Engine::kSglang && engine != Engine::kVllm && engine != Engine::kLlamacpp) {
    return Status::InvalidArgument(std::string("no engine model for engine ") + EngineName(engine));
  }
  Result<ServerShape> s = engine == Engine::kSglang ? Sglang(limits)
                          : engine == Engine::kVllm ? Vllm(limits)
                                                    : Llamacpp(limits);
  if (s.ok()) s->profile.name = std::string("calibrated-") + EngineName(engine);
  return s;
}

}  // namespace capq
