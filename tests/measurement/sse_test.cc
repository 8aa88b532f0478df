#include "capq/measurement/sse.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace capq {
namespace {

std::vector<std::string> Datas(const std::vector<SseEvent>& evs) {
  std::vector<std::string> out;
  for (const auto& e : evs) out.push_back(e.data);
  return out;
}

std::vector<SseEvent> FeedAll(std::string_view bytes, SseFramer* f) {
  std::vector<SseEvent> out;
  f->Feed(bytes, 1, &out);
  f->Finish(2, &out);
  return out;
}

TEST(SseFramer, LfFramesTwoEvents) {
  SseFramer f;
  auto evs = FeedAll("data: {\"a\":1}\n\ndata: [DONE]\n\n", &f);
  EXPECT_EQ(Datas(evs), (std::vector<std::string>{"{\"a\":1}", "[DONE]"}));
  EXPECT_EQ(f.unterminated_events(), 0);
  EXPECT_FALSE(f.overflowed());
}

TEST(SseFramer, CrlfAndBareCrAreLineEndings) {
  for (const char* eol : {"\r\n", "\r", "\n"}) {
    SseFramer f;
    std::string s = std::string("data: x") + eol + eol + "data: y" + eol + eol;
    auto evs = FeedAll(s, &f);
    EXPECT_EQ(Datas(evs), (std::vector<std::string>{"x", "y"})) << "eol bytes " << strlen(eol);
    EXPECT_EQ(f.unterminated_events(), 0);
  }
}

TEST(SseFramer, MixedLineEndingsInOneStream) {
  SseFramer f;
  auto evs = FeedAll("data: a\r\n\r\ndata: b\n\ndata: c\r\rdata: d\r\n\n", &f);
  EXPECT_EQ(Datas(evs), (std::vector<std::string>{"a", "b", "c", "d"}));
}

TEST(SseFramer, CommentsAndKeepAlivesAreDroppedAndCounted) {
  SseFramer f;
  auto evs = FeedAll(": ping\n\n:keep-alive\ndata: x\n: inside\n\n", &f);
  EXPECT_EQ(Datas(evs), (std::vector<std::string>{"x"}));
  EXPECT_EQ(f.comments(), 3);
}

TEST(SseFramer, MultiLineDataJoinedWithLf) {
  SseFramer f;
  auto evs = FeedAll("data: line1\ndata:line2\ndata:  two spaces\n\n", &f);
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].data, "line1\nline2\n two spaces");
}

TEST(SseFramer, FieldWithoutSpaceAndOtherFields) {
  SseFramer f;
  auto evs = FeedAll("event: message\nid: 7\nretry: 100\ndata:{}\nfoo: bar\n\nevent: only\n\n", &f);
  EXPECT_EQ(Datas(evs), (std::vector<std::string>{"{}"}));  // an event with no data is not emitted
}

TEST(SseFramer, EmptyDataLineIsAnEmptyEvent) {
  SseFramer f;
  auto evs = FeedAll("data:\n\ndata\n\n", &f);
  EXPECT_EQ(Datas(evs), (std::vector<std::string>{"", ""}));
}

TEST(SseFramer, UnterminatedLastEventIsEmittedAtFinishAndCounted) {
  SseFramer f;
  std::vector<SseEvent> out;
  f.Feed("data: a\n\ndata: partial", 10, &out);
  ASSERT_EQ(out.size(), 1u);
  f.Finish(20, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].data, "partial");
  EXPECT_EQ(out[1].arrival_ns, 20);
  EXPECT_EQ(f.unterminated_events(), 1);
}

TEST(SseFramer, ArrivalIsTheReadThatCompletedTheEvent) {
  SseFramer f;
  std::vector<SseEvent> out;
  f.Feed("data: a", 100, &out);
  f.Feed("bc\n", 200, &out);
  EXPECT_TRUE(out.empty());
  f.Feed("\ndata: d\n\n", 300, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].data, "abc");
  EXPECT_EQ(out[0].arrival_ns, 300);
  EXPECT_EQ(out[1].arrival_ns, 300);
}

TEST(SseFramer, CrAtEndOfReadThenLfIsOneLineEnding) {
  SseFramer f;
  std::vector<SseEvent> out;
  f.Feed("data: a\r", 1, &out);
  f.Feed("\n", 2, &out);  // completes the CRLF: not a blank line
  EXPECT_TRUE(out.empty());
  f.Feed("\r", 3, &out);
  f.Feed("\n", 4, &out);  // CRLF blank line: dispatch at the CR's read
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, "a");
  EXPECT_EQ(out[0].arrival_ns, 3);
}

// Every split of a stream into two reads, and one byte per read, gives the same events.
TEST(SseFramer, SplitAtEveryByteBoundary) {
  const std::string stream =
      ": keep-alive\r\n\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\r\n\r\n"
      "data: one\ndata: two\n\n:c\rdata:x\r\rdata: [DONE]\n\n";
  SseFramer whole;
  const auto want = Datas(FeedAll(stream, &whole));
  ASSERT_EQ(want.size(), 4u);
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    SseFramer f;
    std::vector<SseEvent> out;
    f.Feed(std::string_view(stream).substr(0, cut), 1, &out);
    f.Feed(std::string_view(stream).substr(cut), 2, &out);
    f.Finish(3, &out);
    EXPECT_EQ(Datas(out), want) << "cut at " << cut;
    EXPECT_EQ(f.comments(), whole.comments()) << "cut at " << cut;
    EXPECT_EQ(f.unterminated_events(), 0) << "cut at " << cut;
  }
  SseFramer f;
  std::vector<SseEvent> out;
  for (size_t i = 0; i < stream.size(); ++i)
    f.Feed(stream.substr(i, 1), static_cast<MonoNs>(i), &out);
  f.Finish(0, &out);
  EXPECT_EQ(Datas(out), want);
}

TEST(SseFramer, HugeEventIsCappedAndFlagged) {
  SseFramer f(/*max_event_bytes=*/64);
  std::vector<SseEvent> out;
  const std::string big(1000, 'x');
  f.Feed("data: " + big.substr(0, 500), 1, &out);
  f.Feed(big.substr(500) + "\n\ndata: small\n\n", 2, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(f.overflowed());
  EXPECT_TRUE(out[0].truncated);
  EXPECT_EQ(out[0].data, std::string(64, 'x'));
  EXPECT_FALSE(out[1].truncated);
  EXPECT_EQ(out[1].data, "small");
}

TEST(SseFramer, ManyDataLinesCappedInTotal) {
  SseFramer f(/*max_event_bytes=*/10);
  auto evs = FeedAll("data: 12345\ndata: 67890\ndata: abc\n\n", &f);
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].data, "12345\n6789");
  EXPECT_TRUE(evs[0].truncated);
  EXPECT_TRUE(f.overflowed());
}

// Regression (sse_framer_fuzz): a long non-data line set overflowed() only when it arrived split
// across reads. Results must never depend on how the bytes were cut.
TEST(SseFramer, LongLineCapDoesNotDependOnReadSizes) {
  const std::string stream = std::string(
                                 "\xe0\x9c\xf5\x91"
                                 "eta:&\0\xffx: ",
                                 13) +
                             std::string(15, '\0') + "c\ndata:";
  SseFramer whole(11), split(11);
  std::vector<SseEvent> a, b;
  whole.Feed(stream, 1, &a);
  whole.Finish(2, &a);
  for (char c : stream) split.Feed(std::string_view(&c, 1), 1, &b);
  split.Finish(2, &b);
  EXPECT_EQ(Datas(a), Datas(b));
  EXPECT_EQ(Datas(a), (std::vector<std::string>{""}));
  EXPECT_TRUE(whole.overflowed());
  EXPECT_EQ(whole.overflowed(), split.overflowed());
  EXPECT_EQ(whole.comments(), split.comments());
  EXPECT_EQ(whole.unterminated_events(), 1);
}

TEST(SseFramer, CountsBytes) {
  SseFramer f;
  std::vector<SseEvent> out;
  f.Feed("data: a\n\n", 1, &out);
  f.Feed("xyz", 1, &out);
  EXPECT_EQ(f.bytes(), 12);
  EXPECT_EQ(f.events(), 1);
}

}  // namespace
}  // namespace capq
