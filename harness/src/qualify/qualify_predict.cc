// A rate row's first guess from a closed-loop qualification, by Little's law: the locator's first
// guess and never evidence (the engine model's predictions are predict_row.cc's).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "capq/qualify/qualify.h"
#include "capq/text.h"

namespace capq {

namespace {

// What differs between a rate row and a closed-loop row of the capacity data, in words; empty when
// they share the identity and the shape.
std::string Differences(const Row& row, const RowInfo& closed) {
  std::vector<std::string> off;
  auto text = [&](const char* name, const std::string& mine, const std::string& theirs) {
    if (mine != theirs) {
      off.push_back(std::string(name) + " '" + theirs + "', not '" + mine + "'");
    }
  };
  text("engine", EngineName(row.identity.engine), closed.engine);
  text("image", row.identity.image, closed.image);
  text("model", row.identity.model, closed.model);
  text("model_revision", row.identity.model_revision, closed.model_revision);
  text("hardware", row.identity.hardware, closed.hardware);
  auto tokens = [&](const char* name, int64_t mine, int64_t theirs) {
    if (mine != theirs) {
      off.push_back(std::string(name) + " " + std::to_string(theirs) + ", not " +
                    std::to_string(mine));
    }
  };
  tokens("input_tokens", row.workload.input_tokens, closed.input_tokens);
  tokens("output_tokens", row.workload.output_tokens, closed.output_tokens);
  std::string out;
  for (const auto& o : off) out += (out.empty() ? "" : ", ") + o;
  return out;
}

}  // namespace

Result<int> PredictLevelFromClosedLoop(const Row& row, const CapacityData& closed,
                                       const std::string& source, std::string* note) {
  if (!row.open_loop()) {
    return Status::InvalidArgument("row " + row.id +
                                   " is closed loop: a closed-loop result starts rate rows only");
  }
  const double step = row.workload.open_loop.rate_step_rps;
  if (!(step > 0)) return Status::InvalidArgument("row " + row.id + " has no rate_step_rps");
  std::string refused;
  for (const RowQualification& q : closed.rows) {
    std::string why;
    if (q.row.open_loop()) {
      why = "a rate qualification (" + std::string(ArrivalKindName(q.row.arrival)) +
            "), not a closed loop";
    } else if (std::string d = Differences(row, q.row); !d.empty()) {
      why = "another identity or shape: " + d;
    } else if (q.status != QualifyStatus::kProven || !q.cmax) {
      why = std::string("no proven Cmax (") + QualifyStatusName(q.status) + ")";
    }
    if (!why.empty()) {
      refused += (refused.empty() ? "" : "; ") + q.row.id + " is " + why;
      continue;
    }
    const int cmax = *q.cmax;
    double sum_ms = 0;
    int n = 0;
    for (const TrialSummary* t : q.Trials(QualifyPhase::kConfirm, cmax)) {
      if (!t->has_metrics || !std::isfinite(t->e2e_ms.mean)) continue;
      sum_ms += t->e2e_ms.mean;
      ++n;
    }
    if (n == 0 || !(sum_ms > 0)) {
      refused += (refused.empty() ? "" : "; ") + q.row.id +
                 " has no E2E measured at C=" + std::to_string(cmax);
      continue;
    }
    const double e2e_s = sum_ms / n / 1000;
    const double rps = cmax / e2e_s;
    // A hair of tolerance, so that 6 / 4.8 s / 0.25 = 5 is not floored to 4 by rounding.
    const int level = std::max(1, static_cast<int>(std::floor(rps / step + 1e-9)));
    if (note) {
      const LoadScale scale = LoadScaleOf(row);
      *note = "Little's law on " + q.row.id + " (" + source + "): Cmax " + std::to_string(cmax) +
              " / mean E2E " + Fmt("%.2f", e2e_s) + " s at C=" + std::to_string(cmax) + " = " +
              Fmt("%.2f", rps) + " rps, floored to a multiple of " + Fmt("%g", step) +
              " rps: " + scale.Label(level) + " (level " + std::to_string(level) + ")";
    }
    return level;
  }
  if (closed.rows.empty()) refused = "it holds no row";
  return Status::InvalidArgument(source + " cannot start " + row.id + ": " + refused +
                                 " (a closed-loop qualification of the same engine, image, model, "
                                 "hardware and input/output tokens is needed)");
}

}  // namespace capq
