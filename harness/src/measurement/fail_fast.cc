#include "capq/measurement/fail_fast.h"

#include <algorithm>
#include <cstdio>

#include "capq/measurement/decode.h"

namespace capq {
namespace {

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

std::string Printable(const std::string& s, size_t max_bytes = 200) {
  std::string out;
  for (unsigned char c : s.substr(0, max_bytes)) {
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  return s.size() > max_bytes ? out + "..." : out;
}

// A warm-up counts in zero_errors only (the other gates judge measured streams); a gate the row
// switched off falls back to zero_errors, which sees every failure as an error.
std::string GateOr(const RawRecord& r, const Gate& g, const char* name) {
  return r.phase == Phase::kMeasured && g.enabled ? name : "zero_errors";
}

StreamBreak Break(const RawRecord& r, std::string gate, std::string evidence) {
  return StreamBreak{std::move(gate), r.id, r.phase == Phase::kWarmup, std::move(evidence)};
}

}  // namespace

std::string StreamBreak::Reason() const {
  return "stopped at the first broken stream: " + gate + " on " + request_id +
         (warmup ? " (warm-up)" : "") + ": " + evidence;
}

FailFastRules FailFastRulesFor(const Row& row, const std::string& served_model_name) {
  FailFastRules f;
  const double scale = row.identity.time_scale > 0 ? row.identity.time_scale : 1.0;
  f.enabled = row.correctness.fail_fast.enabled;
  f.time_scale = scale;
  f.stall_timeout_s = row.correctness.stall_timeout_s;
  f.stall_timeout_wall_s = row.correctness.stall_timeout_s / scale;
  f.served_model_name = row.correctness.model_name.enabled ? served_model_name : "";
  f.gates = row.correctness;
  return f;
}

std::optional<StreamBreak> FindStreamBreak(const RawRecord& r, const FailFastRules& rules) {
  if (!rules.enabled) return std::nullopt;
  return FindStreamBreak(r, DecodeRecord(r), rules);
}

std::optional<StreamBreak> FindStreamBreak(const RawRecord& r, const RequestResult& d,
                                           const FailFastRules& rules) {
  if (!rules.enabled || !r.cancelled_by_harness.empty() || r.actual_send_ns == 0) {
    return std::nullopt;
  }
  const Correctness& g = rules.gates;
  if (r.stalled) {
    const MonoNs last = std::max(r.last_byte_ns, r.actual_send_ns);
    return Break(r, GateOr(r, g.no_cancellations, "no_cancellations"),
                 "stalled " + Seconds(NsToS(r.end_ns - last) * rules.time_scale) +
                     " s with no byte (the bound is " + Seconds(rules.stall_timeout_s) + " s)");
  }
  if (!r.transport_error.empty() || r.cancelled) {
    return Break(r, GateOr(r, g.no_cancellations, "no_cancellations"),
                 std::string(r.timed_out ? "timed out: " : "cut: ") + Printable(r.transport_error));
  }
  if (r.http_status != 200) {
    return Break(r, GateOr(r, g.status_200, "status_200"),
                 "HTTP status " + std::to_string(r.http_status) +
                     (r.body.empty() ? "" : ": " + Printable(r.body)));
  }
  if (!d.errors.empty()) return Break(r, "zero_errors", d.errors.front());
  if (r.phase == Phase::kMeasured && !rules.served_model_name.empty()) {
    for (const std::string& m : d.models) {
      if (m == rules.served_model_name) continue;
      return Break(r, "model_name",
                   "a chunk names model '" + Printable(m) + "', the row serves '" +
                       Printable(rules.served_model_name) + "'");
    }
  }
  return std::nullopt;
}

}  // namespace capq
