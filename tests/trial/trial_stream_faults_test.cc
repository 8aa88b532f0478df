// The simulator's stream-shape faults: each broken shape trips the gate made for it (and only the
// gates it really breaks besides), and each quirk real servers have passes, so that capq neither
// trusts a counter the text does not prove nor fails a server for valid SSE.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "capq/measurement/raw_evidence.h"
#include "trial_test_util.h"

namespace capq::testing {
namespace {

struct ShapeCase {
  std::string name;
  std::string rule;   // one YAML list item under `faults:`
  std::string gate;   // the gate that must fail; "" = the trial must pass
  std::string words;  // must appear in that gate's evidence
  std::set<std::string> also;
  std::string identity = "";  // extra identity lines (the dialect)
  // Response header lines (the status line included) every measured raw record must hold, and
  // header names none may: the proof that the trial saw the quirk it passed.
  std::vector<std::string> headers = {};
  std::vector<std::string> absent = {};
};

void PrintTo(const ShapeCase& c, std::ostream* os) { *os << c.name; }

constexpr const char* kVllm = "  sim_dialect: vllm\n";

// Requests are numbered by arrival; with 2 warm-ups, 2..21 are the measured ones (m0..m19).
std::vector<ShapeCase> Cases() {
  return {
      // Usage says 16, the stream carries 8 tokens of text in 8 non-empty chunks.
      {"hollow_usage",
       "{kind: hollow_usage, requests: [10]}",
       "text_recount",
       "m8 (usage says 16, the text re-counts to 8)",
       {}},
      {"truncate_prompt",
       "{kind: truncate_prompt, requests: [11]}",
       "prompt_tokens",
       "m9 (server counted",
       {}},
      {"wrong_model",
       "{kind: wrong_model, requests: [12]}",
       "model_name",
       "m10 ('capq-sim-other-model')",
       {}},
      {"several_choices",
       "{kind: several_choices, requests: [13]}",
       "zero_errors",
       "2 choices in one chunk",
       {}},
      {"wrong_index", "{kind: wrong_index, requests: [14]}", "zero_errors", "choice index 1", {}},
      {"data_after_done",
       "{kind: data_after_done, requests: [15]}",
       "zero_errors",
       "data after [DONE]",
       {}},
      {"second_done",
       "{kind: second_done, requests: [16]}",
       "zero_errors",
       "data after [DONE]: [DONE]",
       {}},
      {"json_error_200",
       "{kind: json_error_200, requests: [17]}",
       "zero_errors",
       "not an SSE stream",
       {"exact_completion_tokens", "finish_reason", "nonempty_deltas", "verify_cold"}},
      {"sse_fields", "{kind: sse_fields}", "", "", {}},
      {"keepalive_comments", "{kind: keepalive_comments}", "", "", {}},
      {"usage_every_chunk", "{kind: usage_every_chunk}", "", "", {}},
      // One event as two HTTP chunks split inside a two-byte character: still valid UTF-8 text.
      {"split_utf8", "{kind: split_utf8}", "", "", {}},
      // Asked for identity, sent gzip anyway: libcurl decodes it, the record keeps the coding.
      {"gzip", "{kind: gzip}", "", "", {}, "", {"Content-Encoding: gzip"}},
      // No length, no chunks: the body ends with the connection (RFC 9112 section 6.3, rule 8).
      {"close_delimited",
       "{kind: close_delimited}",
       "",
       "",
       {},
       "",
       {"HTTP/1.0 200 OK", "Connection: close"},
       {"transfer-encoding", "content-length"}},
      // Cut short, such a body ends as cleanly as a whole one: no transport error, so
      // no_cancellations passes, and the missing [DONE] is what fails.
      {"close_delimited_cut",
       "{kind: close_delimited, requests: [10]}\n  - {kind: cut_connection, after_tokens: 3, "
       "requests: [10]}",
       "zero_errors",
       "m8 (the stream ended without data: [DONE]",
       {"exact_completion_tokens", "finish_reason", "verify_cold"}},
      // Without a per-request counter verify_cold falls back to /metrics: the vLLM dialect has
      // a prefix-cache hit counter. SGLang with --enable-cache-report (its /server_info says so)
      // reports a count only when above zero, so there silence reads as nothing cached; a
      // server that reports nothing at all fails closed (trial_variations_test.cc).
      {"no_prompt_details", "{kind: no_prompt_details}", "", "", {}, kVllm},
      {"null_prompt_details", "{kind: null_prompt_details}", "", "", {}, kVllm},
      {"no_prompt_details_sglang", "{kind: no_prompt_details}", "", "", {}},
  };
}

// Reads the trial's raw evidence: every measured record must hold each of `c.headers` and none of
// the header names in `c.absent`.
void ExpectResponseHeaders(const std::string& trial_dir, const ShapeCase& c) {
  Result<RawEvidenceFile> raw = ReadRawRecords(trial_dir + "/raw.jsonl");
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  int measured = 0;
  for (const RawRecord& rec : raw->records) {
    const RawRecord* r = &rec;
    if (r->phase != Phase::kMeasured) continue;
    ++measured;
    const std::vector<std::string>& got = r->response_headers;
    for (const std::string& h : c.headers) {
      EXPECT_NE(std::find(got.begin(), got.end(), h), got.end()) << r->id << " lacks '" << h << "'";
    }
    for (const std::string& name : c.absent) {
      for (std::string h : got) {
        std::transform(h.begin(), h.end(), h.begin(),
                       [](unsigned char ch) { return std::tolower(ch); });
        EXPECT_NE(h.rfind(name + ":", 0), 0u) << r->id << " has '" << h << "'";
      }
    }
  }
  EXPECT_EQ(measured, 20);
}

class TrialStreamFault : public ::testing::TestWithParam<ShapeCase> {};

TEST_P(TrialStreamFault, TripsItsGateOrPasses) {
  const ShapeCase& fc = GetParam();
  SimRowSpec spec;
  spec.server_expect = fc.identity;
  Row row = MakeSimRow(spec);
  std::string dir = ScratchDir("shape-" + fc.name);
  std::string faults = WriteText(dir + "/faults.yaml", "faults:\n  - " + fc.rule + "\n");
  auto sim = StartSim(row, faults);
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrial(row, Options(sim->url(), dir + "/trial"));
  sim->Stop();
  for (const auto& other : rep.verdict.correctness.gates) {
    if (other.name == fc.gate || !other.enabled || other.passed) continue;
    EXPECT_TRUE(fc.also.count(other.name))
        << fc.name << " failed unrelated gate " << other.name << ": " << other.evidence;
  }
  if (!fc.headers.empty() || !fc.absent.empty()) ExpectResponseHeaders(dir + "/trial", fc);
  if (fc.gate.empty()) {
    EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kPass)
        << (rep.verdict.reasons.empty() ? "" : rep.verdict.reasons[0]);
    auto v = ValidateTrialDir(dir + "/trial");
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->verdict.outcome, TrialOutcome::kPass);
    return;
  }
  EXPECT_EQ(rep.verdict.outcome, TrialOutcome::kCorrectnessFail);
  const GateResult* g = Gate(rep.verdict, fc.gate);
  ASSERT_NE(g, nullptr);
  EXPECT_FALSE(g->passed) << fc.gate << ": " << g->evidence;
  EXPECT_NE(g->evidence.find(fc.words), std::string::npos) << g->evidence;
  // The recorded evidence reproduces the same verdict.
  auto v = ValidateTrialDir(dir + "/trial");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->verdict.outcome, TrialOutcome::kCorrectnessFail);
}

INSTANTIATE_TEST_SUITE_P(Shapes, TrialStreamFault, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<ShapeCase>& i) { return i.param.name; });

}  // namespace
}  // namespace capq::testing
