#include "capq/engine/predict.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "capq/hash.h"

namespace capq::engine {
namespace {

std::vector<uint32_t> MakePrompt(const PredictOptions& o, int shared, uint64_t request_key) {
  std::vector<uint32_t> t(static_cast<size_t>(o.prompt_tokens));
  for (int64_t i = 0; i < o.prompt_tokens; ++i) {
    // Shared template tokens are the same small ids everywhere; the rest are distinct per request
    // from their first position on, so no two prompts share more than the template.
    t[static_cast<size_t>(i)] =
        i < shared
            ? static_cast<uint32_t>(i + 1)
            : static_cast<uint32_t>(SplitMix64(SplitMix64(o.prompt_seed) ^ SplitMix64(request_key) ^
                                               static_cast<uint64_t>(i)) |
                                    0x80000000u);
  }
  return t;
}

// A closed-loop client's next request reaches the server after the step that starts the instant
// its predecessor finished: no server waits for a client before its next step. llama.cpp's loop
// (tools/server/server-queue.cpp start_loop) takes new tasks only between update_slots() calls,
// and a task posted while llama_decode() runs joins the batch after it; so does the simulator,
// whose replacement arrives over HTTP after the step began. Submitted at the finish instant, the
// replacements would join that step (Engine::Submit re-plans a step at its start), prefill
// together and predict a later boundary than the engine holds (llamacpp_tiny at 512 / 128:
// predicted Cmax 6, proven 4).
constexpr VirtNs kReplacementLagNs = 1;

// Runs `count` requests at concurrency `conc` starting at `*now`; appends to `out`.
Status RunPhase(Engine* engine, VirtNs* now, const PredictOptions& o, int shared, int count,
                int conc, uint64_t id_base, std::vector<PredictedRequest>* out) {
  const size_t first = out->size();
  out->resize(first + static_cast<size_t>(count));
  int submitted = 0, in_flight = 0;
  std::vector<bool> seen_token(static_cast<size_t>(count), false);
  auto submit = [&](VirtNs at) {
    PredictedRequest& r = (*out)[first + static_cast<size_t>(submitted)];
    r.index = submitted;
    r.submit_ns = at;
    EngineRequest req;
    req.id = id_base + static_cast<uint64_t>(submitted);
    req.prompt_tokens = MakePrompt(o, shared, req.id);
    req.max_new_tokens = o.output_tokens;
    engine->Submit(std::move(req), at);
    ++submitted;
    ++in_flight;
  };
  std::vector<EngineEvent> events;
  engine->AdvanceTo(*now, &events);
  while (submitted < count && in_flight < conc) submit(*now);
  while (in_flight > 0) {
    events.clear();
    engine->AdvanceTo(*now, &events);
    if (events.empty()) {
      auto next = engine->NextEventTime();
      if (!next) return Status::Internal("engine went idle with requests in flight");
      *now = *next;
      engine->AdvanceTo(*now, &events);
    }
    int finished = 0;
    for (const EngineEvent& e : events) {
      if (e.request_id < id_base || e.request_id >= id_base + static_cast<uint64_t>(count))
        continue;
      const size_t k = static_cast<size_t>(e.request_id - id_base);
      PredictedRequest& r = (*out)[first + k];
      switch (e.kind) {
        case EngineEvent::Kind::kAdmitted:
          r.cached_tokens = e.cached_tokens;
          break;
        case EngineEvent::Kind::kTokens:
          if (!seen_token[k]) r.first_token_ns = e.t;
          seen_token[k] = true;
          r.output_tokens = e.total_tokens;
          break;
        case EngineEvent::Kind::kFinished:
          r.end_ns = e.t;
          ++finished;
          break;
        case EngineEvent::Kind::kRejected:
          return Status::InvalidArgument(std::string("the profile rejects this request shape: ") +
                                         (e.finish_reason ? e.finish_reason : "?"));
      }
    }
    in_flight -= finished;
    for (int i = 0; i < finished && submitted < count; ++i) submit(*now + kReplacementLagNs);
  }
  return Status::Ok();
}

}  // namespace

Result<PredictedTrial> PredictTrialOn(Engine* engine, VirtNs start_ns, const PredictOptions& o) {
  if (o.prompt_tokens < 1 || o.output_tokens < 1 || o.concurrency < 1 || o.measured_requests < 1 ||
      o.warmup_requests < 0 || o.warmup_concurrency < 1) {
    return Status::InvalidArgument(
        "prediction needs prompt_tokens, output_tokens, concurrency and measured_requests >= 1");
  }
  if (!engine->Idle()) return Status::FailedPrecondition("prediction needs an idle engine");
  if (o.flush_before && !engine->FlushCache()) {
    return Status::FailedPrecondition("flush refused by a busy engine");
  }
  const int shared = static_cast<int>(std::min<int64_t>(
      o.prompt_tokens, o.shared_prefix_tokens >= 0 ? o.shared_prefix_tokens
                                                   : engine->profile().template_prefix_tokens));
  PredictedTrial trial;
  VirtNs now = start_ns;
  // Warm-up prompts take ids [0, warmup) and measured ones follow, so the two sets never share a
  // prompt (the seed's warm-up leak); prompt_seed separates trials.
  const uint64_t id_base = 0;
  if (o.warmup_requests > 0) {
    CAPQ_RETURN_IF_ERROR(RunPhase(engine, &now, o, shared, o.warmup_requests, o.warmup_concurrency,
                                  id_base, &trial.warmup));
  }
  trial.measured_start_ns = now;
  CAPQ_RETURN_IF_ERROR(RunPhase(engine, &now, o, shared, o.measured_requests, o.concurrency,
                                id_base + static_cast<uint64_t>(o.warmup_requests),
                                &trial.measured));
  trial.measured_end_ns = now;
  return trial;
}

Result<PredictedTrial> PredictTrial(const EngineProfile& profile, const PredictOptions& o) {
  Status s = ValidateProfile(profile);
  if (!s.ok()) return s;
  Engine engine(profile);
  return PredictTrialOn(&engine, 0, o);
}

double TtftPercentileNs(const std::vector<PredictedRequest>& requests, double q) {
  if (requests.empty()) return 0;
  std::vector<double> v;
  v.reserve(requests.size());
  for (const auto& r : requests) v.push_back(static_cast<double>(r.ttft_ns()));
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace capq::engine
