// The kernel's receive stamp: the arrival of queued bytes however late they are read, and none
// when bytes landed after the peek that took it.
#include "../../harness/src/measurement/receive_stamp.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "capq/clock.h"

namespace capq::internal {
namespace {

// A connected loopback TCP pair: `reader` has receive stamps on unless asked not to.
struct Pair {
  int reader = -1, writer = -1;
  explicit Pair(bool stamps = true) {
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&a), len), 0);
    EXPECT_EQ(listen(listener, 1), 0);
    EXPECT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len), 0);
    reader = socket(AF_INET, SOCK_STREAM, 0);
    if (stamps) {
      EXPECT_TRUE(EnableReceiveStamps(reader));
    }
    EXPECT_EQ(connect(reader, reinterpret_cast<sockaddr*>(&a), len), 0);
    writer = accept(listener, nullptr, nullptr);
    close(listener);
  }
  ~Pair() {
    close(reader);
    close(writer);
  }
  void Write(const std::string& s) const {
    ASSERT_EQ(write(writer, s.data(), s.size()), static_cast<ssize_t>(s.size()));
  }
  size_t Read() const {
    char buf[128 * 1024];
    const ssize_t n = recv(reader, buf, sizeof buf, MSG_DONTWAIT);
    return n > 0 ? static_cast<size_t>(n) : 0;
  }
};

void Sleep(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// One probe held for the whole suite keeps the kernel's stamping on, as the load generator's
// does for a run: each test's sockets then come and go without turning it off.
class ReceiveProbeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    keeper_ = new ReceiveProbe;
    Sleep(50);  // the kernel turns stamping on a moment after it is asked
  }
  static void TearDownTestSuite() {
    delete keeper_;
    keeper_ = nullptr;
  }
  static ReceiveProbe* keeper_;
};
ReceiveProbe* ReceiveProbeTest::keeper_ = nullptr;

TEST_F(ReceiveProbeTest, StampsQueuedBytesAtTheirArrivalNotAtTheRead) {
  Pair p;
  const MonoNs before = NowNs();
  p.Write("data: one\n\n");
  const MonoNs after = NowNs();
  Sleep(30);  // the loop is late: the bytes wait in the kernel
  ReceiveProbe probe;
  probe.Peek(p.reader);
  ASSERT_GT(p.Read(), 0u);
  const MonoNs t = NowNs();
  const MonoNs k = probe.Confirm(p.reader, t);
  ASSERT_GT(k, 0);
  // The two clocks are carried over at the peek; allow a millisecond for that, far below the 30.
  EXPECT_GE(k, before - 1'000'000);
  EXPECT_LE(k, after + 1'000'000);
  EXPECT_LE(t - k, t - after + 1'000'000);
  EXPECT_GE(t - k, 25'000'000) << "the read came 30 ms after the bytes";
}

TEST_F(ReceiveProbeTest, TheNewestQueuedByteSetsTheStamp) {
  Pair p;
  p.Write("data: one\n\n");
  Sleep(20);
  const MonoNs second = NowNs();
  p.Write("data: two\n\n");
  Sleep(20);
  ReceiveProbe probe;
  probe.Peek(p.reader);
  p.Read();
  const MonoNs k = probe.Confirm(p.reader, NowNs());
  ASSERT_GT(k, 0);
  EXPECT_GE(k, second - 1'000'000) << "never earlier than the last bytes the read took";
}

TEST_F(ReceiveProbeTest, BytesLandingAfterThePeekSpendIt) {
  Pair p;
  p.Write("data: one\n\n");
  Sleep(10);
  ReceiveProbe probe;
  probe.Peek(p.reader);
  p.Write("data: two\n\n");  // lands before the read takes both
  Sleep(5);
  p.Read();
  EXPECT_EQ(probe.Confirm(p.reader, NowNs()), 0);
  p.Write("data: three\n\n");
  EXPECT_EQ(probe.Confirm(p.reader, NowNs()), 0) << "spent until the next peek";
}

TEST_F(ReceiveProbeTest, AnswersOnlyForThePeekedSocketAndOnlyUntilCleared) {
  Pair p, other;
  p.Write("x");
  other.Write("y");
  Sleep(5);
  ReceiveProbe probe;
  probe.Peek(p.reader);
  EXPECT_EQ(probe.Confirm(other.reader, NowNs()), 0);
  EXPECT_EQ(probe.Confirm(-1, NowNs()), 0);
  EXPECT_GT(probe.Confirm(p.reader, NowNs()), 0);
  probe.Clear();
  EXPECT_EQ(probe.Confirm(p.reader, NowNs()), 0);
}

TEST_F(ReceiveProbeTest, NeverLaterThanTheCallbacksOwnClock) {
  Pair p;
  p.Write("x");
  Sleep(5);
  ReceiveProbe probe;
  probe.Peek(p.reader);
  const MonoNs early = 1;  // a callback clock before the stamp: the stamp yields to it
  EXPECT_EQ(probe.Confirm(p.reader, early), early);
}

TEST_F(ReceiveProbeTest, NoStampWithoutTheSocketOptionOrWithMoreQueuedThanThePeekTakes) {
  Pair plain(/*stamps=*/false);
  plain.Write("x");
  Sleep(5);
  ReceiveProbe probe;
  probe.Peek(plain.reader);
  EXPECT_EQ(probe.Confirm(plain.reader, NowNs()), 0);

  Pair big;
  big.Write(std::string(100 * 1024, 'z'));
  Sleep(10);
  probe.Peek(big.reader);
  EXPECT_EQ(probe.Confirm(big.reader, NowNs()), 0);
}

}  // namespace
}  // namespace capq::internal
