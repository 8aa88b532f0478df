// What a trial of a trace's samples (a mix, or whole-prompt trajectory turns) sent, for the report
// to hold beside the trace: each measured request's lengths as the server counted them and its send
// time.
#include <cmath>
#include <map>

#include "capq/model/plan.h"
#include "trial_internal.h"

namespace capq::internal {

SentRequests MeasureSent(const TrialPlan& plan, const std::vector<RequestResult>& measured,
                         double time_scale) {
  std::map<std::string, const RequestResult*> by_id;
  for (const RequestResult& r : measured) by_id[r.id] = &r;
  SentRequests out;
  if (plan.arrival == ArrivalKind::kReplay) out.first_trace_index = plan.ramp_requests;
  MonoNs first = 0;
  for (const PlanRequest& p : plan.measured) {
    if (p.ramp) continue;
    SentRequest s;
    s.send_s = NAN;
    auto it = by_id.find(p.id);
    if (it != by_id.end() && it->second->start_ns != 0) {
      const RequestResult& r = *it->second;
      if (first == 0) first = r.start_ns;
      s.input_tokens = r.prompt_tokens.value_or(-1);
      s.output_tokens = r.completion_tokens.value_or(-1);
      s.send_s = static_cast<double>(r.start_ns - first) * 1e-9 * time_scale;
    }
    out.requests.push_back(s);
  }
  return out;
}

}  // namespace capq::internal
