// The trial reads its raw evidence back after the load (the chunk gaps, the re-count's texts); a
// record that decodes otherwise than the load decoded it means the evidence does not hold.
#include <gtest/gtest.h>

#include "../../harness/src/trial/trial_internal.h"
#include "capq/measurement/decode.h"
#include "capq/targets/target.h"

namespace capq::internal {
namespace {

// What the load's recorder kept of a stream (facts, no text, no gaps) and what the file gives.
struct Pair {
  RequestResult live, back;
};

Pair Stream(const std::string& id, Phase phase) {
  Pair p;
  p.back.id = id;
  p.back.phase = phase;
  p.back.output_text = "";  // counted only when non-empty
  p.back.output_sha256 = Sha256Hex("");
  p.back.chunks = 4;
  p.back.text_gaps_ms = {1.5f, 2.5f};
  p.live = p.back;
  p.live.text_gaps_ms.clear();
  return p;
}

std::unique_ptr<Target> AnyTarget() {
  TargetOptions o;
  o.base_url = "http://127.0.0.1:9";  // never asked: no text to count
  auto t = MakeTarget(Engine::kSglang, o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(*t) : nullptr;
}

TEST(TrialReadBack, ARecordThatReadsBackAsStreamedGivesItsGapsBack) {
  auto target = AnyTarget();
  ASSERT_NE(target, nullptr);
  Pair p = Stream("m0", Phase::kMeasured);
  ReadBackOutcome out;
  ReadBackRecord(std::move(p.back), &p.live, *target, &out);
  EXPECT_EQ(out.problem, "");
  EXPECT_EQ(p.live.text_gaps_ms, (std::vector<float>{1.5f, 2.5f}));
}

TEST(TrialReadBack, ATextOrChunkCountOtherThanStreamedIsNamedAndKeepsNothing) {
  auto target = AnyTarget();
  ASSERT_NE(target, nullptr);
  Pair text = Stream("m3", Phase::kMeasured);
  text.back.output_sha256 = Sha256Hex("a different text");
  ReadBackOutcome out;
  ReadBackRecord(std::move(text.back), &text.live, *target, &out);
  EXPECT_EQ(out.problem, "m3 reads back other than it was streamed");
  EXPECT_TRUE(text.live.text_gaps_ms.empty());

  Pair chunks = Stream("w1", Phase::kWarmup);
  chunks.back.chunks = 5;
  ReadBackOutcome out2;
  ReadBackRecord(std::move(chunks.back), &chunks.live, *target, &out2);
  EXPECT_EQ(out2.problem, "w1 reads back other than it was streamed");
  // The first problem is the one kept.
  Pair later = Stream("m4", Phase::kMeasured);
  later.back.chunks = 1;
  ReadBackRecord(std::move(later.back), &later.live, *target, &out);
  EXPECT_EQ(out.problem, "m3 reads back other than it was streamed");
}

}  // namespace
}  // namespace capq::internal
