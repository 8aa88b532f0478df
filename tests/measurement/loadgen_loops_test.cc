// The load generator over several event loops (loadgen.h, "Loops"): the arrival models' split,
// and runs on two loops against the embedded simulator and the loopback server: the same records
// as one loop, the schedule kept per request, the kernel's stamps, the evidence whole, and a
// stop or an early decision on one loop stopping every loop.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "capq/measurement/arrival.h"
#include "capq/measurement/decode.h"
#include "capq/measurement/early_decision.h"
#include "capq/measurement/evidence_log.h"
#include "capq/measurement/loadgen.h"
#include "capq/measurement/raw_evidence.h"
#include "capq/sim/server.h"
#include "loopback_server.h"
#include "small_sim.h"

namespace capq {
namespace {

using loopback::Describe;
using loopback::LoopbackServer;
using loopback::Spec;
using nlohmann::json;

constexpr MonoNs kMs = 1'000'000;

// Every share's releases, in the order each share makes them, with the phase of `count` begun
// at `start`; a closed loop's slot frees as soon as it is taken.
std::vector<std::vector<Release>> Drain(std::vector<std::unique_ptr<ArrivalModel>>& shares,
                                        MonoNs start, size_t count) {
  std::vector<std::vector<Release>> out(shares.size());
  for (size_t k = 0; k < shares.size(); ++k) {
    shares[k]->Begin(start, count);
    while (shares[k]->Peek()) {
      Release r = shares[k]->Take();
      shares[k]->Finished(r.index, start);
      out[k].push_back(r);
    }
    EXPECT_TRUE(shares[k]->Exhausted());
  }
  return out;
}

TEST(ArrivalSplit, AClosedLoopDealsItsSlotsAndRequestsOutByIndex) {
  auto shares = ClosedLoopArrivals(3)->Split(2);
  ASSERT_EQ(shares.size(), 2u);
  const auto got = Drain(shares, 100, 7);
  std::vector<size_t> a, b;
  for (const Release& r : got[0]) a.push_back(r.index);
  for (const Release& r : got[1]) b.push_back(r.index);
  EXPECT_EQ(a, (std::vector<size_t>{0, 2, 4, 6}));
  EXPECT_EQ(b, (std::vector<size_t>{1, 3, 5}));
  EXPECT_TRUE(shares[0]->Releases(4));
  EXPECT_FALSE(shares[0]->Releases(5));
  // Two slots and one: the first two of share 0 and the first of share 1 start at the start.
  auto fresh = ClosedLoopArrivals(3)->Split(2);
  fresh[0]->Begin(100, 7);
  EXPECT_EQ(fresh[0]->Take().intended_ns, 100);
  EXPECT_EQ(fresh[0]->Take().intended_ns, 100);
  EXPECT_FALSE(fresh[0]->Peek());  // both slots busy
}

TEST(ArrivalSplit, AClosedLoopWithFewerSlotsThanLoopsLeavesTheRestNothing) {
  auto shares = ClosedLoopArrivals(1)->Split(2);
  ASSERT_EQ(shares.size(), 2u);
  const auto got = Drain(shares, 0, 3);
  EXPECT_EQ(got[0].size(), 3u);
  EXPECT_TRUE(got[1].empty());
  EXPECT_FALSE(shares[1]->Releases(0));
}

TEST(ArrivalSplit, AScheduleKeepsEveryRequestsIntendedTime) {
  std::vector<MonoNs> offsets;
  for (int i = 0; i < 11; ++i) offsets.push_back(i * 3 * kMs + (i % 2));
  auto shares = ScheduledArrivals(offsets)->Split(3);
  ASSERT_EQ(shares.size(), 3u);
  const MonoNs start = 5000;
  std::set<size_t> seen;
  for (const auto& share : Drain(shares, start, offsets.size())) {
    for (const Release& r : share) {
      EXPECT_TRUE(seen.insert(r.index).second) << "released twice: " << r.index;
      EXPECT_EQ(r.intended_ns, start + offsets[r.index]);
    }
  }
  EXPECT_EQ(seen.size(), offsets.size());
}

TEST(ArrivalSplit, SessionsDoNotSplit) {
  SessionSchedule s;
  s.sessions = {{{0, 0}}, {{1, 0}}};
  EXPECT_TRUE(SessionArrivals(s, nullptr)->Split(2).empty());
}

std::vector<PlannedRequest> SimPlan(Phase phase, int n, const std::string& model) {
  std::vector<PlannedRequest> out;
  const std::string body = json{
      {"model", model},
      {"messages", json::array({{{"role", "user"}, {"content", "count to eight"}}})},
      {"stream", true},
      {"stream_options", {{"include_usage", true}}},
      {"max_tokens", 8},
      {"ignore_eos", true}}.dump();
  for (int i = 0; i < n; ++i) {
    out.push_back({(phase == Phase::kWarmup ? "w" : "m") + std::to_string(i), phase, i, body});
  }
  return out;
}

struct SimRun {
  LoadResult load;
  std::map<std::string, RawRecord> evidence;  // read back from the file, by request
};

// 4 warm-ups at C=2, 40 measured at C=8, against the simulator, on `loops` loops.
SimRun RunOnSim(const sim::SimServer& sim, int loops) {
  auto w =
      EvidenceWriter::Create(TempPath("capq_loops", "loops" + std::to_string(loops) + ".jsonl"),
                             EvidenceCompression::kNone);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  std::unique_ptr<EvidenceWriter> writer = std::move(*w);
  writer->Append(json{{"schema", kRawSchemaV2}}.dump());
  LoadSpec spec;
  spec.url = sim.url() + "/v1/chat/completions";
  spec.warmup = SimPlan(Phase::kWarmup, 4, sim.profile().served_model_name);
  spec.warmup_concurrency = 2;
  spec.measured = SimPlan(Phase::kMeasured, 40, sim.profile().served_model_name);
  spec.concurrency = 8;
  spec.request_timeout_s = 30;
  spec.keep_events = false;
  spec.evidence = writer.get();
  spec.loops = loops;
  SimRun out;
  Result<LoadResult> res = RunLoad(spec);
  EXPECT_TRUE(res.ok()) << res.status().ToString();
  if (!res.ok()) return out;
  out.load = std::move(*res);
  writer->Append(R"({"end":{}})");
  EXPECT_TRUE(writer->Close().ok());
  Result<RawEvidenceFile> f = ReadRawRecords(writer->path());
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  if (!f.ok()) return out;
  for (RawRecord& r : f->records) {
    EXPECT_TRUE(out.evidence.emplace(r.id, std::move(r)).second) << "two record lines";
  }
  return out;
}

TEST(RunLoadLoops, TwoLoopsGiveTheRecordsOneLoopGives) {
  auto sim = StartSmallSim();
  ASSERT_NE(sim, nullptr);
  const SimRun one = RunOnSim(*sim, 1);
  const SimRun two = RunOnSim(*sim, 2);
  ASSERT_EQ(one.load.records.size(), 44u);
  ASSERT_EQ(two.load.records.size(), one.load.records.size());
  ASSERT_EQ(one.load.loops.size(), 1u);
  ASSERT_EQ(two.load.loops.size(), 2u);
  int64_t kernel_stamped = 0, events = 0;
  for (size_t i = 0; i < one.load.records.size(); ++i) {
    const RawRecord& a = one.load.records[i];
    const RawRecord& b = two.load.records[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.phase, b.phase);
    EXPECT_EQ(a.index, b.index);
    EXPECT_EQ(b.http_status, 200) << Describe(b);
    EXPECT_FALSE(b.cancelled) << Describe(b);
    EXPECT_LE(b.intended_send_ns, b.actual_send_ns);
    const RequestResult& da = one.load.results[i];
    const RequestResult& db = two.load.results[i];
    EXPECT_TRUE(db.errors.empty()) << b.id;
    EXPECT_EQ(da.completion_tokens, db.completion_tokens) << b.id;
    EXPECT_EQ(da.finish_reason, db.finish_reason) << b.id;
    // The evidence has each request's record and events once, whichever loop wrote them.
    auto it = two.evidence.find(b.id);
    ASSERT_NE(it, two.evidence.end()) << b.id;
    EXPECT_EQ(it->second.actual_send_ns, b.actual_send_ns);
    const RequestResult back = DecodeRecord(it->second);
    EXPECT_EQ(back.completion_tokens, db.completion_tokens) << b.id;
    for (const SseEvent& ev : it->second.events) kernel_stamped += ev.kernel_ns > 0;
    events += static_cast<int64_t>(it->second.events.size());
  }
  EXPECT_EQ(two.evidence.size(), two.load.records.size());
  // The kernel's receive stamps survive the second loop (not every event: a read may race).
  EXPECT_GT(kernel_stamped, events / 2);
  // The warm-ups ended before the one measured start; both loops' shares ran.
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_LE(two.load.records[i].end_ns, two.load.measured_start_ns);
  }
  int streams = 0;
  int64_t handled = 0;
  for (const auto& f : two.load.loops) {
    EXPECT_GT(f.streams, 0);
    EXPECT_EQ(f.measured_sends, 20);
    EXPECT_GE(f.peak_in_flight, 1);
    EXPECT_LE(f.peak_in_flight, 4);  // its share of C=8
    streams += f.streams;
    handled += f.events;
  }
  EXPECT_EQ(streams, 44);
  EXPECT_EQ(handled, events);
}

TEST(RunLoadLoops, AnOpenLoopScheduleIsKeptPerRequestAcrossLoops) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 2, 30, 1, R"({"mode":"sse","n":3,"gap_ms":2})");
  std::vector<MonoNs> offsets;
  for (int i = 0; i < 30; ++i) offsets.push_back(i * 4 * kMs);
  spec.measured_arrivals = [offsets] { return ScheduledArrivals(offsets); };
  spec.loops = 2;
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  ASSERT_EQ(res->loops.size(), 2u);
  for (int i = 0; i < 30; ++i) {
    const RawRecord& r = res->records[2 + i];
    EXPECT_EQ(r.http_status, 200) << Describe(r);
    EXPECT_EQ(r.intended_send_ns, res->measured_start_ns + offsets[i]) << r.id;
    EXPECT_GE(r.actual_send_ns, r.intended_send_ns) << r.id;
  }
  EXPECT_EQ(res->loops[0].measured_sends + res->loops[1].measured_sends, 30);
}

TEST(RunLoadLoops, AFailFastStopOnOneLoopStopsEveryLoop) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 0, 12, 4, R"({"mode":"forever","gap_ms":5})");
  spec.measured[1].body = R"({"mode":"sse","n":2})";  // m1 goes to the second loop
  spec.loops = 2;
  std::mutex mu;
  std::vector<std::string> checked;
  spec.on_complete_check = [&](const RawRecord& r,
                               const RequestResult&) -> std::optional<std::string> {
    std::lock_guard<std::mutex> l(mu);
    checked.push_back(r.id);
    return r.id == "m1" ? std::optional<std::string>("m1 is broken") : std::nullopt;
  };
  const MonoNs t0 = NowNs();
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok());
  EXPECT_LT(NowNs() - t0, 5000 * kMs);  // the forever streams on the first loop were cut
  EXPECT_FALSE(res->interrupted);
  EXPECT_EQ(res->stopped_by, "m1");
  EXPECT_EQ(res->stop_reason, "m1 is broken");
  for (const RawRecord& r : res->records) {
    if (r.id == "m1") continue;
    EXPECT_TRUE(r.cancelled) << Describe(r);
    EXPECT_EQ(r.cancelled_by_harness, "fail_fast after m1") << Describe(r);
  }
}

TEST(RunLoadLoops, AnEarlyDecisionStopsEveryLoop) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 0, 8, 4, R"({"mode":"hang"})");
  spec.request_timeout_s = 20;
  spec.loops = 2;
  spec.early_decision.enabled = true;
  spec.early_decision.gates = {SloGate{SloMetric::kTtft, 50, 100}};
  spec.early_decision.min_completed = 0;
  const MonoNs t0 = NowNs();
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok());
  EXPECT_LT(NowNs() - t0, 10000 * kMs);  // long before the hanging requests' timeout
  ASSERT_TRUE(res->decided.has_value());
  EXPECT_EQ(res->stopped_by, "");
  for (const RawRecord& r : res->records) {
    EXPECT_TRUE(r.cancelled) << Describe(r);
    EXPECT_EQ(r.cancelled_by_harness, kDecidedEarlyCut) << Describe(r);
  }
  ASSERT_EQ(res->loops.size(), 2u);
  EXPECT_GT(res->loops[0].streams, 0);
  EXPECT_GT(res->loops[1].streams, 0);
}

}  // namespace
}  // namespace capq
