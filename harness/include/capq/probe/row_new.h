// capq rows new: a row written from the running server (issue 28). It asks the engine's adapter
// what capq doctor asks (capq/probe/doctor.h), generating nothing: the served model, the limits the
// engine reports under its own names (identity.server_expect), the model path and, for the
// simulator, its profile digest and time scale; the image digest from the container runtime when
// a container is named; the chat template's shared prefix. The rest is the row's defaults. Every
// value it cannot read is written as "TODO: <why>", which the row loader refuses at its line until
// a person fills it in.
//
// Thread safety: WriteNewRow() blocks its calling thread; separate calls share nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "capq/model/row.h"
#include "capq/status.h"
#include "capq/targets/target.h"

namespace capq {

struct NewRowOptions {
  TargetOptions target;
  Identity identity;  // the engine (and for Engine::kSim the dialect)
  int64_t input_tokens = 0, output_tokens = 0;
  std::vector<SloGate> slo;
  std::string id;            // the row id ([a-z][a-z0-9_]*)
  std::string container;     // docker container running the server ("" = none named)
  std::string sim_profile;   // simulator: the profile file the server runs ("" = search rows/)
  std::string row_dir;       // the folder the row is written to (sim_profile is relative to it)
  std::string command_line;  // recorded in the header
  double ready_timeout_s = 10;
};

struct NewRow {
  std::string yaml;
  std::vector<std::string> todos;  // "identity.hardware: the server does not report its hardware"
};

// Unavailable when the server does not answer its readiness probe; InvalidArgument when no
// adapter can be made for the options.
Result<NewRow> WriteNewRow(const NewRowOptions& options);

// "llamacpp_512x128" from an engine and a shape, or the stem of `out_path` made an id.
std::string NewRowId(const std::string& out_path, const Identity& identity, int64_t input_tokens,
                     int64_t output_tokens);

}  // namespace capq
