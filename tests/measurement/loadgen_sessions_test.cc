// Session turns end to end: RunLoad against the embedded simulated server, each turn's body the
// conversation so far, built from what the server streamed back for the turns before it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "capq/measurement/arrival.h"
#include "capq/measurement/decode.h"
#include "capq/measurement/evidence_log.h"
#include "capq/measurement/loadgen.h"
#include "capq/measurement/raw_evidence.h"
#include "capq/sim/server.h"
#include "small_sim.h"

namespace capq {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr MonoNs kThinkNs = 30'000'000;

// `sessions` sessions of `turns` turns: session s turn t is request s * turns + t.
struct Sessions {
  std::vector<PlannedRequest> measured;
  SessionSchedule schedule;
};
Sessions Plan(int concurrency, size_t sessions, size_t turns) {
  Sessions p;
  p.schedule.concurrency = concurrency;
  for (size_t s = 0; s < sessions; ++s) {
    std::vector<SessionTurn>& v = p.schedule.sessions.emplace_back();
    for (size_t t = 0; t < turns; ++t) {
      const size_t i = s * turns + t;
      p.measured.push_back({"m" + std::to_string(i), Phase::kMeasured, static_cast<int>(i), "{}"});
      v.push_back({i, t == 0 ? 0 : kThinkNs});
    }
  }
  return p;
}

std::string UserText(size_t index) { return "turn request " + std::to_string(index); }

// [u1, a1, u2, a2, ..., u_t]: a session turn's conversation so far.
TurnBodyFn ChatBodies(const std::string& model, size_t turns) {
  return [model, turns](size_t index, const std::vector<std::string>& earlier) {
    const size_t first = index - index % turns;
    json messages = json::array();
    for (size_t k = 0; k < earlier.size(); ++k) {
      messages.push_back({{"role", "user"}, {"content", UserText(first + k)}});
      messages.push_back({{"role", "assistant"}, {"content", earlier[k]}});
    }
    messages.push_back({{"role", "user"}, {"content", UserText(index)}});
    return json{{"model", model},  {"messages", messages},
                {"stream", true},  {"stream_options", {{"include_usage", true}}},
                {"max_tokens", 8}, {"ignore_eos", true}}
        .dump();
  };
}

// The run's evidence, with the first and last lines a trial writes around the load's.
struct Evidence {
  std::string path;
  std::unique_ptr<EvidenceWriter> writer;
};
Evidence OpenEvidence(const std::string& name) {
  Evidence e;
  e.path = TempPath("capq_sessions", name);
  auto w = EvidenceWriter::Create(e.path, EvidenceCompression::kNone);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  if (!w.ok()) return e;
  e.writer = std::move(*w);
  e.writer->Append(json{{"schema", kRawSchemaV2}}.dump());
  return e;
}
std::map<std::string, RawRecord> CloseAndRead(Evidence& e) {
  e.writer->Append(R"({"end":{}})");
  EXPECT_TRUE(e.writer->Close().ok());
  std::map<std::string, RawRecord> out;
  Result<RawEvidenceFile> f = ReadRawRecords(e.path);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  if (!f.ok()) return out;
  for (RawRecord& r : f->records) {
    EXPECT_TRUE(out.emplace(r.id, std::move(r)).second) << "two record lines for one request";
  }
  return out;
}

LoadSpec SessionSpec(const sim::SimServer& sim, const Sessions& plan, size_t turns) {
  LoadSpec spec;
  spec.url = sim.url() + "/v1/chat/completions";
  spec.measured = plan.measured;
  spec.concurrency = plan.schedule.concurrency;
  spec.keep_events = false;  // the turns' texts must come through all the same
  spec.request_timeout_s = 30;
  spec.measured_arrivals = [schedule = plan.schedule,
                            body = ChatBodies(sim.profile().served_model_name, turns)] {
    return SessionArrivals(schedule, body);
  };
  return spec;
}

TEST(RunLoadSessions, EachTurnSendsBackTheTextStreamedForTheTurnsBeforeIt) {
  auto sim = StartSmallSim();
  ASSERT_NE(sim, nullptr);
  constexpr size_t kTurns = 3;
  const Sessions plan = Plan(2, 2, kTurns);
  Evidence ev = OpenEvidence("sessions.jsonl");
  ASSERT_NE(ev.writer, nullptr);
  LoadSpec spec = SessionSpec(*sim, plan, kTurns);
  spec.evidence = ev.writer.get();
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  ASSERT_EQ(res->records.size(), 6u);
  std::map<std::string, RawRecord> file = CloseAndRead(ev);
  ASSERT_EQ(file.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const RawRecord& r = res->records[i];
    ASSERT_EQ(r.http_status, 200) << r.id << " " << r.transport_error;
    EXPECT_TRUE(r.events.empty()) << r.id << ": kept once its text was taken";
    ASSERT_FALSE(r.request_body.empty()) << r.id;
    EXPECT_EQ(file[r.id].request_body, r.request_body) << r.id;
    const json body = json::parse(r.request_body);
    const size_t t = i % kTurns;
    ASSERT_EQ(body["messages"].size(), 2 * t + 1) << r.id;
    EXPECT_EQ(body["messages"][2 * t]["content"], UserText(i));
    if (t == 0) continue;
    const RawRecord& prev = res->records[i - 1];
    const std::string text = DecodeRecord(file[prev.id]).content_text;
    ASSERT_FALSE(text.empty()) << prev.id;
    EXPECT_EQ(body["messages"][2 * t - 1]["role"], "assistant");
    EXPECT_EQ(body["messages"][2 * t - 1]["content"], text) << r.id;
    EXPECT_GE(r.actual_send_ns - prev.end_ns, kThinkNs) << r.id;
    EXPECT_EQ(r.intended_send_ns, prev.end_ns + kThinkNs) << r.id;
  }
  // The two sessions ran side by side: the second's first turn went with the first's.
  EXPECT_EQ(res->records[3].intended_send_ns, res->records[0].intended_send_ns);
}

// The sessions of `plan`, writing to `ev`, whose request 1 (session 0's turn 2) sends a body the
// server refuses.
LoadSpec SpecWithARefusedTurn(const sim::SimServer& sim, const Sessions& plan, size_t turns,
                              Evidence* ev) {
  LoadSpec spec = SessionSpec(sim, plan, turns);
  spec.evidence = ev->writer.get();
  TurnBodyFn good = ChatBodies(sim.profile().served_model_name, turns);
  spec.measured_arrivals = [schedule = plan.schedule, good] {
    return SessionArrivals(schedule, [good](size_t index, const std::vector<std::string>& e) {
      return index == 1 ? std::string("{\"messages\": 7}") : good(index, e);
    });
  };
  return spec;
}

// A turn the server refuses ends its session: the rest is recorded as never sent, once, and the
// next session takes the place.
TEST(RunLoadSessions, AFailedTurnLeavesTheRestOfItsSessionUnsentAndTheNextSessionRuns) {
  auto sim = StartSmallSim();
  ASSERT_NE(sim, nullptr);
  constexpr size_t kTurns = 3;
  const Sessions plan = Plan(1, 2, kTurns);
  Evidence ev = OpenEvidence("sessions_failed.jsonl");
  ASSERT_NE(ev.writer, nullptr);
  LoadSpec spec = SpecWithARefusedTurn(*sim, plan, kTurns, &ev);
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  ASSERT_EQ(res->records.size(), 6u);
  EXPECT_NE(res->records[1].http_status, 200);
  const RawRecord& unsent = res->records[2];
  EXPECT_EQ(unsent.actual_send_ns, 0);
  EXPECT_TRUE(unsent.cancelled);
  EXPECT_THAT(unsent.cancelled_by_harness, HasSubstr("session 0"));
  EXPECT_THAT(unsent.transport_error, HasSubstr("not sent"));
  EXPECT_EQ(unsent.intended_send_ns, res->records[1].end_ns);
  EXPECT_EQ(res->records[3].intended_send_ns, res->records[1].end_ns);
  for (size_t i = 3; i < 6; ++i) EXPECT_EQ(res->records[i].http_status, 200) << i;
  std::map<std::string, RawRecord> file = CloseAndRead(ev);
  ASSERT_EQ(file.size(), 6u);
  EXPECT_EQ(file["m2"].cancelled_by_harness, unsent.cancelled_by_harness);
  EXPECT_EQ(file["m1"].request_body, "{\"messages\": 7}");
}

// The failed turn stops the run too (fail fast): the turn its session left unsent keeps the
// session's reason and is recorded once; the turns never released are the harness's.
TEST(RunLoadSessions, AFailedTurnThatStopsTheRunIsRecordedOnce) {
  auto sim = StartSmallSim();
  ASSERT_NE(sim, nullptr);
  constexpr size_t kTurns = 3;
  const Sessions plan = Plan(1, 2, kTurns);
  Evidence ev = OpenEvidence("sessions_failed_stopped.jsonl");
  ASSERT_NE(ev.writer, nullptr);
  LoadSpec spec = SpecWithARefusedTurn(*sim, plan, kTurns, &ev);
  spec.on_complete_check = [](const RawRecord& r,
                              const RequestResult&) -> std::optional<std::string> {
    if (r.http_status != 200) return "refused";
    return std::nullopt;
  };
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->stopped_by, "m1");
  ASSERT_EQ(res->records.size(), 6u);
  EXPECT_THAT(res->records[2].cancelled_by_harness, HasSubstr("session 0"));
  EXPECT_EQ(res->records[5].actual_send_ns, 0);
  EXPECT_EQ(res->records[5].cancelled_by_harness, HarnessCutAfter("m1"));
  std::map<std::string, RawRecord> file = CloseAndRead(ev);
  EXPECT_EQ(file.size(), 6u);
  EXPECT_THAT(file["m2"].cancelled_by_harness, HasSubstr("session 0"));
}

// Fail fast at the first turn: every measured request is in the records once, the turns never
// released marked as the harness's.
TEST(RunLoadSessions, AStoppedRunMarksTheUnreleasedTurnsOnce) {
  auto sim = StartSmallSim();
  ASSERT_NE(sim, nullptr);
  constexpr size_t kTurns = 3;
  const Sessions plan = Plan(1, 2, kTurns);
  Evidence ev = OpenEvidence("sessions_stopped.jsonl");
  ASSERT_NE(ev.writer, nullptr);
  LoadSpec spec = SessionSpec(*sim, plan, kTurns);
  spec.evidence = ev.writer.get();
  spec.on_complete_check = [](const RawRecord& r,
                              const RequestResult&) -> std::optional<std::string> {
    if (r.id == "m0") return "stop here";
    return std::nullopt;
  };
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->stopped_by, "m0");
  ASSERT_EQ(res->records.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const RawRecord& r = res->records[i];
    EXPECT_EQ(r.id, "m" + std::to_string(i));
    if (r.actual_send_ns != 0) continue;
    EXPECT_TRUE(r.cancelled) << r.id;
    EXPECT_EQ(r.cancelled_by_harness, HarnessCutAfter("m0")) << r.id;
  }
  EXPECT_EQ(res->records[5].actual_send_ns, 0);
  EXPECT_EQ(CloseAndRead(ev).size(), 6u);
}

}  // namespace
}  // namespace capq
