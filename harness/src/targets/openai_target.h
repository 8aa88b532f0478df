// The adapter for a generic OpenAI-compatible server (openai_target.cc); adapters.cc makes it.
#pragma once

#include <memory>

#include "capq/targets/target.h"

namespace capq::internal {

std::unique_ptr<Target> MakeOpenAiTarget(TargetOptions options);

}  // namespace capq::internal
