#include "capq/sim/faults.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>

#include "capq/file_io.h"
#include "capq/sim/tokenizer.h"

namespace capq::sim {
namespace {

struct KindName {
  FaultKind kind;
  const char* name;
};
constexpr KindName kKindNames[] = {
    {FaultKind::kHttpStatus, "http_status"},
    {FaultKind::kErrorFrame, "error_frame"},
    {FaultKind::kCutConnection, "cut_connection"},
    {FaultKind::kMissingDone, "missing_done"},
    {FaultKind::kMalformedJson, "malformed_json"},
    {FaultKind::kUsageOffBy, "usage_off_by"},
    {FaultKind::kEarlyStop, "early_stop"},
    {FaultKind::kEmptyDeltas, "empty_deltas"},
    {FaultKind::kDuplicateOutput, "duplicate_output"},
    {FaultKind::kSlowFirstByte, "slow_first_byte"},
    {FaultKind::kStall, "stall"},
    {FaultKind::kHollowUsage, "hollow_usage"},
    {FaultKind::kTruncatePrompt, "truncate_prompt"},
    {FaultKind::kWrongModel, "wrong_model"},
    {FaultKind::kSeveralChoices, "several_choices"},
    {FaultKind::kWrongIndex, "wrong_index"},
    {FaultKind::kDataAfterDone, "data_after_done"},
    {FaultKind::kSecondDone, "second_done"},
    {FaultKind::kSseFields, "sse_fields"},
    {FaultKind::kKeepaliveComments, "keepalive_comments"},
    {FaultKind::kUsageEveryChunk, "usage_every_chunk"},
    {FaultKind::kNoPromptDetails, "no_prompt_details"},
    {FaultKind::kNullPromptDetails, "null_prompt_details"},
    {FaultKind::kJsonError200, "json_error_200"},
    {FaultKind::kSplitUtf8, "split_utf8"},
    {FaultKind::kGzip, "gzip"},
    {FaultKind::kCloseDelimited, "close_delimited"},
    {FaultKind::kLyingFlush, "lying_flush"},
    {FaultKind::kHealth503ForS, "health_503_for_s"},
};

constexpr const char* kDefaultDuplicateText = "capq simulator duplicate output";

std::string Where(const std::string& source, const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  if (m.is_null()) return source;
  return source + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

// Reads a scalar as T, turning yaml-cpp's exception into a Status naming where and which key.
template <typename T>
Status ReadScalar(const YAML::Node& node, const std::string& where, const std::string& key,
                  T* out) {
  if (!node.IsScalar())
    return Status::InvalidArgument(where + ": key '" + key + "' must be a scalar");
  try {
    *out = node.as<T>();
  } catch (const YAML::Exception&) {
    return Status::InvalidArgument(where + ": key '" + key + "' has a value of the wrong type ('" +
                                   node.Scalar() + "')");
  }
  return Status::Ok();
}

// A rule's "kind": one of the names in kKindNames.
Status ReadKind(const YAML::Node& v, const std::string& where, FaultRule* rule) {
  std::string name;
  CAPQ_RETURN_IF_ERROR(ReadScalar(v, where, "kind", &name));
  bool found = false;
  for (const auto& kn : kKindNames) {
    if (name == kn.name) {
      rule->kind = kn.kind;
      found = true;
    }
  }
  if (!found) return Status::InvalidArgument(where + ": unknown fault kind '" + name + "'");
  return Status::Ok();
}

// A rule's "requests": one request index or a list of them.
Status ReadRequests(const YAML::Node& v, const std::string& where, FaultRule* rule) {
  const std::string key = "requests";
  if (v.IsSequence()) {
    for (const auto& item : v) {
      int64_t i = 0;
      CAPQ_RETURN_IF_ERROR(ReadScalar(item, where, key, &i));
      if (i < 0) return Status::InvalidArgument(where + ": key 'requests': negative index");
      rule->requests.push_back(i);
    }
  } else {
    int64_t i = 0;
    CAPQ_RETURN_IF_ERROR(ReadScalar(v, where, key, &i));
    if (i < 0) return Status::InvalidArgument(where + ": key 'requests': negative index");
    rule->requests.push_back(i);
  }
  return Status::Ok();
}

// The keys that choose which requests a rule hits: prompt_contains, probability, from_request.
Status ReadSelector(const std::string& key, const YAML::Node& v, const std::string& where,
                    FaultRule* rule) {
  if (key == "prompt_contains") {
    CAPQ_RETURN_IF_ERROR(ReadScalar(v, where, key, &rule->prompt_contains));
    if (rule->prompt_contains.empty()) {
      return Status::InvalidArgument(where + ": key 'prompt_contains' must not be empty");
    }
  } else if (key == "probability") {
    double p = 0;
    CAPQ_RETURN_IF_ERROR(ReadScalar(v, where, key, &p));
    if (!(p >= 0 && p <= 1)) {
      return Status::InvalidArgument(where + ": key 'probability' must be in [0, 1]");
    }
    rule->probability = p;
  } else if (key == "from_request") {
    CAPQ_RETURN_IF_ERROR(ReadScalar(v, where, key, &rule->from_request));
  }
  return Status::Ok();
}

// The keys that shape what a rule does: status, after_tokens, n, same_as, delay_ms, seconds.
Status ReadParameter(const std::string& key, const YAML::Node& v, const std::string& where,
                     FaultRule* rule) {
  if (key == "status") {
    CAPQ_RETURN_IF_ERROR(ReadScalar(v, where, key, &rule->status));
    if (rule->status != 500 && rule->status != 429 && rule->status != 503) {
      return Status::InvalidArgument(where + ": key 'status' must be 500, 429 or 503");
    }
  } else if (key == "after_tokens") {
    CAPQ_RETURN_IF_ERROR(ReadScalar(v, where, key, &rule->after_tokens));
    if (rule->after_tokens < 0) {
      return Status::InvalidArgument(where + ": key 'after_tokens' must be >= 0");
    }
  } else if (key == "n") {
    CAPQ_RETURN_IF_ERROR(ReadScalar(v, where, key, &rule->n));
  } else if (key == "same_as") {
    std::string s;
    CAPQ_RETURN_IF_ERROR(ReadScalar(v, where, key, &s));
    rule->same_as = s;
  } else if (key == "delay_ms") {
    CAPQ_RETURN_IF_ERROR(ReadScalar(v, where, key, &rule->delay_ms));
    if (!(rule->delay_ms >= 0))
      return Status::InvalidArgument(where + ": key 'delay_ms' must be >= 0");
  } else if (key == "seconds") {
    CAPQ_RETURN_IF_ERROR(ReadScalar(v, where, key, &rule->seconds));
    if (!(rule->seconds >= 0))
      return Status::InvalidArgument(where + ": key 'seconds' must be >= 0");
  }
  return Status::Ok();
}

Status ParseRule(const YAML::Node& node, const std::string& source, size_t index, FaultRule* rule) {
  const std::string rule_where = Where(source, node) + ": faults[" + std::to_string(index) + "]";
  if (!node.IsMap()) return Status::InvalidArgument(rule_where + ": a rule must be a mapping");
  static const std::set<std::string> kKeys = {
      "kind",         "requests", "prompt_contains", "probability", "from_request", "status",
      "after_tokens", "n",        "same_as",         "delay_ms",    "seconds"};
  bool has_kind = false;
  for (const auto& kv : node) {
    std::string key = kv.first.Scalar();
    const std::string where = Where(source, kv.second) + ": faults[" + std::to_string(index) + "]";
    if (!kKeys.count(key)) return Status::InvalidArgument(where + ": unknown key '" + key + "'");
    const YAML::Node& v = kv.second;
    if (key == "kind") {
      CAPQ_RETURN_IF_ERROR(ReadKind(v, where, rule));
      has_kind = true;
    } else if (key == "requests") {
      CAPQ_RETURN_IF_ERROR(ReadRequests(v, where, rule));
    } else {
      CAPQ_RETURN_IF_ERROR(ReadSelector(key, v, where, rule));
      CAPQ_RETURN_IF_ERROR(ReadParameter(key, v, where, rule));
    }
  }
  if (!has_kind) return Status::InvalidArgument(rule_where + ": missing key 'kind'");
  return Status::Ok();
}

bool Matches(const FaultRule& r, uint64_t seed, size_t rule_index, int64_t request_index,
             const std::string& prompt_text) {
  if (request_index < r.from_request) return false;
  if (!r.requests.empty()) {
    bool hit = false;
    for (int64_t i : r.requests) hit = hit || i == request_index;
    if (!hit) return false;
  }
  if (!r.prompt_contains.empty() && prompt_text.find(r.prompt_contains) == std::string::npos) {
    return false;
  }
  if (r.probability) {
    uint64_t h = Mix64(Mix64(seed, rule_index), static_cast<uint64_t>(request_index));
    double u = static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0);  // [0, 1)
    if (!(u < *r.probability)) return false;
  }
  return true;
}

// The kinds that change a stream's shape rather than cut it short: kept apart so that
// ForRequest's switch stays one screen.
void ApplyStreamShapeRule(const FaultRule& r, RequestFaults* f) {
  switch (r.kind) {
    case FaultKind::kHollowUsage:
      f->hollow_usage = true;
      break;
    case FaultKind::kTruncatePrompt:
      f->truncate_prompt = true;
      break;
    case FaultKind::kWrongModel:
      f->wrong_model = true;
      break;
    case FaultKind::kSeveralChoices:
      f->several_choices_at = r.after_tokens;
      break;
    case FaultKind::kWrongIndex:
      f->wrong_index_at = r.after_tokens;
      break;
    case FaultKind::kDataAfterDone:
      f->data_after_done = true;
      break;
    case FaultKind::kSecondDone:
      f->second_done = true;
      break;
    case FaultKind::kSseFields:
      f->sse_fields = true;
      break;
    case FaultKind::kKeepaliveComments:
      f->keepalive_comments = true;
      break;
    case FaultKind::kUsageEveryChunk:
      f->usage_every_chunk = true;
      break;
    case FaultKind::kNoPromptDetails:
      f->no_prompt_details = true;
      break;
    case FaultKind::kNullPromptDetails:
      f->null_prompt_details = true;
      break;
    case FaultKind::kJsonError200:
      f->json_error_200 = true;
      break;
    case FaultKind::kSplitUtf8:
      f->split_utf8_at = r.after_tokens;
      break;
    case FaultKind::kGzip:
      f->gzip = true;
      break;
    case FaultKind::kCloseDelimited:
      f->close_delimited = true;
      break;
    default:
      break;
  }
}

}  // namespace

const char* FaultKindName(FaultKind kind) {
  for (const auto& kn : kKindNames) {
    if (kn.kind == kind) return kn.name;
  }
  return "unknown";
}

bool RequestFaults::any() const {
  return http_status || error_frame_after || cut_after || missing_done || malformed_after ||
         usage_off_by != 0 || early_stop_after || empty_deltas || duplicate_of ||
         slow_first_byte_ms > 0 || stall_after || hollow_usage || truncate_prompt || wrong_model ||
         several_choices_at || wrong_index_at || data_after_done || second_done || sse_fields ||
         keepalive_comments || usage_every_chunk || no_prompt_details || null_prompt_details ||
         json_error_200 || split_utf8_at || gzip || close_delimited;
}

Result<FaultPlan> FaultPlan::Load(const std::string& path) {
  Result<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status().WithContext("the faults file");
  return Parse(*text, path);
}

Result<FaultPlan> FaultPlan::Parse(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(source + ":" + std::to_string(e.mark.line + 1) + ":" +
                                   std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  FaultPlan plan;
  if (root.IsNull()) return plan;
  if (!root.IsMap()) return Status::InvalidArgument(source + ": the faults file must be a mapping");
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    const std::string where = Where(source, kv.second);
    if (key == "seed") {
      CAPQ_RETURN_IF_ERROR(ReadScalar(kv.second, where, key, &plan.seed_));
    } else if (key == "faults") {
      if (kv.second.IsNull()) continue;
      if (!kv.second.IsSequence()) {
        return Status::InvalidArgument(where + ": key 'faults' must be a list of rules");
      }
      size_t i = 0;
      for (const auto& item : kv.second) {
        FaultRule rule;
        CAPQ_RETURN_IF_ERROR(ParseRule(item, source, i, &rule));
        if (rule.kind == FaultKind::kLyingFlush) plan.lying_flush_ = true;
        if (rule.kind == FaultKind::kHealth503ForS && plan.health_503_for_s_ == 0) {
          plan.health_503_for_s_ = rule.seconds;
        }
        plan.rules_.push_back(std::move(rule));
        ++i;
      }
    } else {
      return Status::InvalidArgument(where + ": unknown key '" + key + "' (expected seed, faults)");
    }
  }
  return plan;
}

RequestFaults FaultPlan::ForRequest(int64_t request_index, const std::string& prompt_text) const {
  RequestFaults f;
  std::set<FaultKind> seen;
  for (size_t i = 0; i < rules_.size(); ++i) {
    const FaultRule& r = rules_[i];
    if (r.kind == FaultKind::kLyingFlush || r.kind == FaultKind::kHealth503ForS) continue;
    if (seen.count(r.kind)) continue;
    if (!Matches(r, seed_, i, request_index, prompt_text)) continue;
    seen.insert(r.kind);
    switch (r.kind) {
      case FaultKind::kHttpStatus:
        f.http_status = r.status;
        break;
      case FaultKind::kErrorFrame:
        f.error_frame_after = r.after_tokens;
        break;
      case FaultKind::kCutConnection:
        f.cut_after = r.after_tokens;
        break;
      case FaultKind::kMissingDone:
        f.missing_done = true;
        break;
      case FaultKind::kMalformedJson:
        f.malformed_after = r.after_tokens;
        break;
      case FaultKind::kUsageOffBy:
        f.usage_off_by = r.n;
        break;
      case FaultKind::kEarlyStop:
        f.early_stop_after = r.after_tokens;
        break;
      case FaultKind::kEmptyDeltas:
        f.empty_deltas = true;
        break;
      case FaultKind::kDuplicateOutput:
        f.duplicate_of = r.same_as ? *r.same_as : std::string(kDefaultDuplicateText);
        break;
      case FaultKind::kSlowFirstByte:
        f.slow_first_byte_ms = r.delay_ms;
        break;
      case FaultKind::kStall:
        f.stall_after = r.after_tokens;
        break;
      case FaultKind::kLyingFlush:
      case FaultKind::kHealth503ForS:
        break;
      default:
        ApplyStreamShapeRule(r, &f);
        break;
    }
  }
  return f;
}

}  // namespace capq::sim
