// The identity section of a row: what serves it (engine, image pinned by digest, or a simulator
// profile), the model and hardware, and the server limits it pins (server_expect).
#include <filesystem>
#include <system_error>

#include "row_reader_internal.h"

namespace capq::row_reader {

namespace fs = std::filesystem;

bool RowParser::ParseIdentity(const Entry& entry, Identity* id) {
  MapView m;
  if (!OpenMap(entry, "identity", "the serving identity", &m)) return false;
  if (!CheckKeys(m, {"engine", "image", "model", "model_revision", "served_model_name", "hardware",
                     "driver", "server_expect", "sim_profile", "time_scale", "sim_dialect",
                     "sim_variations"})) {
    return false;
  }
  const Entry* e = nullptr;
  if (!Required(m, "engine", "sglang, vllm, llamacpp, openai or sim", &e)) return false;
  std::string engine;
  if (!GetEnum(*e, "identity.engine", {"sglang", "vllm", "llamacpp", "openai", "sim"}, &engine)) {
    return false;
  }
  id->engine = *ParseEngine(engine);
  if (id->engine == Engine::kSim) {
    if (!ParseSimIdentity(m, id)) return false;
  } else if (!ParseServerIdentity(m, id)) {
    return false;
  }
  return ParseModelAndHardware(m, id);
}

bool RowParser::ParseSimIdentity(const MapView& m, Identity* id) {
  const Entry* e = nullptr;
  // Optional pin of the profile's identity digest (sim::ProfileDigest), so that a changed
  // profile fails the row like a retagged image fails a real one.
  if ((e = m.Find("image"))) {
    if (!GetString(*e, "identity.image", &id->image)) return false;
    if (id->image.rfind("capq-sim@sha256:", 0) != 0 || !IsHex(id->image.substr(16), 64)) {
      return Fail(ValueMark(*e), "identity.image",
                  "a sim row pins its profile digest as capq-sim@sha256:<64 hex> (or omits "
                  "image), got " +
                      Shown(id->image));
    }
  }
  if (!Required(m, "sim_profile", "the simulator profile file, relative to this row's folder",
                &e)) {
    return false;
  }
  if (!ParseSimProfile(*e, id)) return false;
  if (!Required(m, "time_scale", "virtual seconds per wall second, > 0", &e)) return false;
  if (!GetNumber(*e, "identity.time_scale", "a number > 0 (virtual seconds per wall second)",
                 Positive, &id->time_scale)) {
    return false;
  }
  if ((e = m.Find("sim_dialect"))) {
    std::string dialect;
    if (!GetEnum(*e, "identity.sim_dialect", {"sglang", "vllm", "llamacpp"}, &dialect)) {
      return false;
    }
    id->sim_dialect = *ParseEngine(dialect);
  }
  if ((e = m.Find("sim_variations"))) {
    std::string mode;
    if (!GetEnum(*e, "identity.sim_variations", {"dialect", "varied"}, &mode)) return false;
    id->sim_varied = mode == "varied";
  }
  return true;
}

// The profile path, made absolute against the row's folder; the file must exist.
bool RowParser::ParseSimProfile(const Entry& e, Identity* id) {
  std::string rel;
  if (!GetString(e, "identity.sim_profile", &rel)) return false;
  std::error_code ec;
  fs::path base = fs::path(file_).parent_path();
  fs::path p = fs::path(rel).is_absolute() ? fs::path(rel) : base / rel;
  fs::path abs = fs::absolute(p, ec);
  if (ec) abs = p;
  abs = abs.lexically_normal();
  if (rel.find('\0') != std::string::npos || !fs::is_regular_file(abs, ec)) {
    return Fail(ValueMark(e), "identity.sim_profile",
                "expected an existing profile file (relative paths resolve against the row's "
                "folder), but " +
                    Shown(abs.string()) + " is not a file");
  }
  id->sim_profile = abs.string();
  return true;
}

// A real engine: pinned by its image digest, with everything that makes the row portable.
bool RowParser::ParseServerIdentity(const MapView& m, Identity* id) {
  const Entry* e = nullptr;
  for (const char* k : {"sim_profile", "time_scale", "sim_dialect", "sim_variations"}) {
    if ((e = m.Find(k))) {
      return Fail(
          e->key_mark, std::string("identity.") + k,
          std::string(k) + " is only for engine: sim; a real engine is pinned by its image");
    }
  }
  if (!Required(m, "image", "repo@sha256:<64 hex>", &e)) return false;
  if (!GetString(*e, "identity.image", &id->image)) return false;
  auto at = id->image.find("@sha256:");
  if (at == std::string::npos || at == 0 || !IsHex(id->image.substr(at + 8), 64) ||
      id->image.find_first_of(" \t@") < at) {
    return Fail(ValueMark(*e), "identity.image",
                "expected an image pinned by digest, repo@sha256:<64 lowercase hex> (a tag can "
                "be moved), got " +
                    Shown(id->image));
  }
  if (!Required(m, "model", "the model repository", &e)) return false;
  if (!GetString(*e, "identity.model", &id->model)) return false;
  if (!Required(m, "model_revision", "the model snapshot, 40 hex", &e)) return false;
  if (!Required(m, "served_model_name", "the name the server answers to", &e)) return false;
  if (!Required(m, "hardware", "e.g. 4 x Intel Arc Pro B70", &e)) return false;
  if (!Required(m, "driver", "the GPU driver version", &e)) return false;
  // An OpenAI-compatible server reports no limits: nothing to pin.
  if (id->engine != Engine::kOpenai &&
      !Required(m, "server_expect", "the server's reported limits", &e)) {
    return false;
  }
  return true;
}

// The keys any engine may give: the model, the hardware and the server's limits.
bool RowParser::ParseModelAndHardware(const MapView& m, Identity* id) {
  const Entry* e = nullptr;
  if ((e = m.Find("model")) && !GetString(*e, "identity.model", &id->model)) return false;
  if ((e = m.Find("model_revision"))) {
    if (!GetString(*e, "identity.model_revision", &id->model_revision)) return false;
    if (!IsHex(id->model_revision, 40)) {
      return Fail(ValueMark(*e), "identity.model_revision",
                  "expected the model snapshot as 40 lowercase hex (a branch name can move), got " +
                      Shown(id->model_revision));
    }
  }
  if ((e = m.Find("served_model_name")) &&
      !GetString(*e, "identity.served_model_name", &id->served_model_name)) {
    return false;
  }
  if ((e = m.Find("hardware")) && !GetString(*e, "identity.hardware", &id->hardware)) return false;
  if ((e = m.Find("driver")) && !GetString(*e, "identity.driver", &id->driver)) return false;
  if ((e = m.Find("server_expect")) && !ParseServerExpect(*e, id)) return false;
  return true;
}

namespace {

SourceMark At(const YAML::Mark& m) {
  return m.is_null() ? SourceMark{1, 1} : SourceMark{m.line + 1, m.column + 1};
}

}  // namespace

// The values as written, with where they stand: which keys an engine reports, and their types, are
// the engine's (targets/row_limits.h checks them with these places).
bool RowParser::ParseServerExpect(const Entry& entry, Identity* id) {
  MapView m;
  if (!OpenMap(entry, "identity.server_expect", "the server's reported limits", &m)) return false;
  id->server_expect_source.at = At(entry.key_mark);
  for (const auto& e : m.entries) {
    if (!e.value.IsScalar()) {
      return Fail(ValueMark(e), "identity.server_expect." + e.key,
                  "expected a limit as the server reports it (a number, true or false, or text), "
                  "got " +
                      Describe(e.value));
    }
    id->server_expect[e.key] = e.value.Scalar();
    id->server_expect_source.keys[e.key] = {At(e.key_mark), At(ValueMark(e)), IsQuoted(e.value)};
  }
  return true;
}

}  // namespace capq::row_reader
