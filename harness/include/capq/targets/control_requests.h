// The control requests each engine's adapter makes, as data (one table beside each adapter,
// targets/<engine>_target.cc): what `capq probe` records from a server so that the adapter and the
// simulator's dialect can be held to what the server really answers.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "capq/model/row.h"

namespace capq {

struct ControlRequest {
  std::string name;  // the corpus file stem: "03-server-info"
  std::string kind;  // "info", "tokenize", "template", "flush"
  std::string method = "GET";
  std::string target;  // path and query
  std::string body;
  std::string content_type = "application/json";  // sent with a body only
  std::string what;                               // in words, for the corpus index
};

struct ControlRequests {
  // The info documents Facts() reads (beside /health, /v1/models and /metrics, which every
  // engine serves).
  std::vector<ControlRequest> info;
  // Asked when the first info request answers 404: an older build's name for the document.
  std::vector<ControlRequest> info_fallback;
  // CountTokens()'s request, then the request that renders the chat template.
  std::vector<ControlRequest> tokenize;
  // When the template request answers the rendered text (its "prompt"), the request that
  // tokenizes it with special tokens, as RenderedTokenIds() does; empty when the template request
  // answers token ids itself.
  std::function<ControlRequest(const std::string& rendered)> tokenize_rendered;
  // Flush(), on an idle server of `slots` slots.
  std::vector<ControlRequest> flush;
  // What a reader of the corpus should know of the engine's readiness probe ("" when nothing).
  std::string readiness_note;
};

// What the requests carry: the probe's own samples, and the server's slots.
struct ControlInputs {
  std::string text;     // what CountTokens() counts
  std::string message;  // the user message whose chat template is rendered
  int slots = 1;        // the slots a per-slot flush erases
};

// The requests of `engine`'s adapter (a real engine; for a simulator pass its dialect's): empty for
// an engine known only by the OpenAI API.
ControlRequests ControlRequestsOf(Engine engine, const ControlInputs& in);

// The build number `engine` reports in the info document it answered at `path` (llama.cpp's /props
// build_info "b10587-3f545be": 10587), where its answers differ by build; 0 when it reports none.
int ReportedBuildNumber(Engine engine, const std::string& path, const nlohmann::json& document);

}  // namespace capq
