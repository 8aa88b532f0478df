// Fuzzes the text_recount gate: arbitrary usage counts, chunk counts, re-counts (or none), the
// and the tolerance must give a verdict without crashing or overflowing (UBSan),
// and a failing verdict must name the streams it blames.
// Input: 8-byte little-endian fields, read in order until the input runs out: the tolerance in
// tenths of a percent, then per stream: completion_tokens, nonempty_chunks,
// the re-count (its top bit set: not re-counted).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "../../harness/src/measurement/validator_internal.h"
#include "capq/model/row.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

struct Reader {
  const uint8_t* data;
  size_t size;
  bool Next(int64_t* v) {
    if (size < sizeof(*v)) return false;
    std::memcpy(v, data, sizeof(*v));
    data += sizeof(*v);
    size -= sizeof(*v);
    return true;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader rd{data, size};
  int64_t tol10 = 0;
  if (!rd.Next(&tol10)) return 0;
  static capq::Row row;  // built once: its defaults cost more than the gate
  row.correctness.text_recount_tolerance_pct = static_cast<double>((tol10 & 0x3ff) % 1000) / 10.0;
  capq::ValidationInput in;
  in.row = &row;
  in.recount_method = "fuzz";
  if (tol10 < 0 && (tol10 & 1)) in.recount_unavailable = "no tokenizer";
  int64_t claimed = 0, chunks = 0, recount = 0;
  // The decoder takes any JSON integer for usage, so a server may claim up to 2^63 - 1 tokens;
  // counts of chunks and re-counts are never negative.
  // More streams add nothing the first few do not reach; they only slow every execution.
  constexpr size_t kMaxStreams = 24;
  while (in.measured.size() < kMaxStreams && rd.Next(&claimed) && rd.Next(&chunks) &&
         rd.Next(&recount)) {
    capq::RequestResult r;
    r.id = "m" + std::to_string(in.measured.size());
    if (claimed & 1) r.completion_tokens = claimed >> 1;
    r.nonempty_chunks = chunks & std::numeric_limits<int64_t>::max();
    if (recount >= 0) in.recounted_tokens[r.id] = recount;
    in.measured.push_back(r);
  }
  const capq::GateResult g = capq::validator_internal::TextRecount(in);
  Check(g.name == "text_recount");
  Check(!g.evidence.empty());
  if (g.passed) Check(g.offending_ids.empty() && !in.measured.empty());
  if (!g.offending_ids.empty()) Check(!g.passed);
  return 0;
}
