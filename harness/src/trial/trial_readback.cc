// After the load: the streams sorted by phase, and the raw evidence read back in one pass, each
// measured stream's text re-counted with the server's tokenizer as it comes back.
#include <string>
#include <unordered_map>

#include "capq/clock.h"
#include "capq/measurement/decode.h"
#include "capq/measurement/raw_evidence.h"
#include "capq/targets/target.h"
#include "trial_internal.h"

namespace capq::internal {
namespace {

// The raw evidence read back in one pass, after the load: what its recorder kept of a stream was
// its facts (LoadResult::results), so each stream's chunk gaps come back from the file here, and
// the server's tokenizer re-counts each measured stream's text as its record ends in the file.
internal::ReadBackOutcome ReadBackEvidence(TrialState& s, Target& target) {
  internal::ReadBackOutcome out;
  std::unordered_map<std::string, RequestResult*> live;
  for (auto* phase : {&s.warm, &s.meas}) {
    for (RequestResult& r : *phase) live.emplace(r.id, &r);
  }
  if (Status st = s.evidence->Flush(); !st.ok()) {
    out.problem = st.message();
    return out;
  }
  size_t seen = 0;
  Result<RawEvidenceSummary> read =
      ReadRawEvidence(s.evidence->path(), [&](RawRecord&&, RequestResult&& back) {
        auto it = live.find(back.id);
        if (it == live.end()) {
          if (out.problem.empty()) out.problem = back.id + " is not one of the load's requests";
          return;
        }
        ++seen;
        internal::ReadBackRecord(std::move(back), it->second, target, &out);
      });
  if (!read.ok()) {
    out.problem = read.status().message();
  } else if (out.problem.empty() && seen != live.size()) {
    out.problem = std::to_string(live.size() - seen) + " requests have no record in it";
  }
  return out;
}

}  // namespace

// The streams were decoded as they arrived (LoadResult::results); sorted by phase here.
void Decode(Trial& t) {
  for (RequestResult& r : t.s.load->results) {
    (r.phase == Phase::kWarmup ? t.s.warm : t.s.meas).push_back(std::move(r));
  }
  t.s.load->results.clear();
}

// The server's own tokenizer re-counts each measured stream's text, after the load and never on
// its timing path: usage fields alone would let an endpoint claim tokens it never streamed. The
// texts (and the chunk gaps) are read back from the raw evidence: a trial whose evidence does not
// read back as it was streamed has no result.
PhaseEnd ReadBackAndRecount(Trial& t) {
  const MonoNs start = NowNs();
  internal::ReadBackOutcome back = ReadBackEvidence(t.s, *t.target);
  if (!back.problem.empty()) {
    return CouldNotRun(t.s, "the raw evidence does not read back: " + back.problem);
  }
  t.s.recount = {{"method",
                  "the server's tokenize endpoint on each stream's text, no special "
                  "tokens"},
                 {"unavailable", back.recount_unavailable}};
  if (back.recount_unavailable.empty()) t.s.recount["counts"] = std::move(back.counts);
  // Its cost, after the timed load: the evidence read back, the texts counted.
  t.s.recount["wall_s"] = NsToS(NowNs() - start);
  t.ev.recount = t.s.recount;
  return std::nullopt;
}

void ReadBackRecord(RequestResult&& back, RequestResult* live, Target& target,
                    ReadBackOutcome* out) {
  if (live->output_sha256 != back.output_sha256 || live->chunks != back.chunks) {
    if (out->problem.empty()) out->problem = back.id + " reads back other than it was streamed";
    return;
  }
  live->text_gaps_ms = std::move(back.text_gaps_ms);
  if (!out->recount_unavailable.empty() || back.phase != Phase::kMeasured) return;
  if (back.output_text.empty()) return;
  Result<int64_t> n = target.CountTokens(back.output_text);
  if (!n.ok()) {
    out->recount_unavailable = "the server's tokenizer: " + n.status().message();
    return;
  }
  out->counts[back.id] = *n;
}

}  // namespace capq::internal
