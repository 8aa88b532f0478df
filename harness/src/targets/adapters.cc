// The adapter for a row's identity (target.h): its engine's, each in a file of its own
// (adapter_common.h), or for a simulator the adapter of the engine its dialect stands in for,
// wrapped in the simulator's (sim_target.cc).
#include <memory>
#include <utility>

#include "adapter_common.h"
#include "capq/targets/engine_limits.h"
#include "capq/targets/target.h"

namespace capq {
namespace {

Result<std::unique_ptr<Target>> MakeEngineTarget(Engine engine, const TargetOptions& options) {
  switch (engine) {
    case Engine::kSglang:
      return internal::MakeSglangTarget(options);
    case Engine::kVllm:
      return internal::MakeVllmTarget(options);
    case Engine::kLlamacpp:
      return internal::MakeLlamacppTarget(options);
    case Engine::kOpenai:
      return internal::MakeOpenAiTarget(options);
    case Engine::kSim:
      break;
  }
  return Status::InvalidArgument("unknown engine");
}

}  // namespace

ControlRequests ControlRequestsOf(Engine engine, const ControlInputs& in) {
  switch (engine) {
    case Engine::kSglang:
      return internal::SglangControlRequests(in);
    case Engine::kVllm:
      return internal::VllmControlRequests(in);
    case Engine::kLlamacpp:
      return internal::LlamacppControlRequests(in);
    case Engine::kOpenai:
    case Engine::kSim:
      break;
  }
  return {};
}

int ReportedBuildNumber(Engine engine, const std::string& path, const nlohmann::json& document) {
  return engine == Engine::kLlamacpp ? internal::LlamacppBuildNumber(path, document) : 0;
}

Result<std::unique_ptr<Target>> MakeTarget(const Identity& identity, const TargetOptions& options) {
  if (options.base_url.rfind("http://", 0) != 0 && options.base_url.rfind("https://", 0) != 0) {
    return Status::InvalidArgument("server URL must start with http:// or https://, got '" +
                                   options.base_url + "'");
  }
  Result<std::unique_ptr<Target>> t = MakeEngineTarget(LimitsEngine(identity), options);
  if (!t.ok() || identity.engine != Engine::kSim) return t;
  return internal::MakeSimTarget(options, identity.sim_profile, std::move(*t));
}

Result<std::unique_ptr<Target>> MakeTarget(Engine engine, const TargetOptions& options) {
  Identity id;
  id.engine = engine;
  return MakeTarget(id, options);
}

}  // namespace capq
