// The kernel's receive stamp of a socket's unread bytes, used only where it is proven to cover
// every byte a read took.
//
// With SO_TIMESTAMPNS on a TCP socket, a peek (recvmsg with MSG_PEEK) of the whole receive queue
// returns the stamp the kernel gave the newest of those bytes when they arrived (on loopback:
// inside the sender's write(2)). Every byte queued at the peek arrived no later than that stamp,
// so the stamp is an honest arrival time for them however long the loop then takes to read them.
// Bytes that land after the peek are not covered, and libcurl may read them in the same action.
// TCP_INFO's count of bytes received tells: it is read before and after the peek (nothing landed
// during it) and again in each read's callback; while it has not moved, whatever libcurl has read
// was queued at the peek. Once it moves, the probe is spent until the next peek.
//
// The kernel turns its stamping on a moment after the first socket asks (and off a moment after
// the last one closes): bytes that land meanwhile carry no stamp. A probe holds a socket of its own
// with stamps on, so from shortly after it is made every connection's bytes are stamped.
//
// One probe per load generator loop; Peek() before the socket's action, Confirm() in its callbacks.
#pragma once

#include <cstdint>
#include <vector>

#include "capq/clock.h"

namespace capq::internal {

// Asks the kernel to stamp the socket's received bytes. False when it refuses (then every
// Confirm() on it answers 0).
bool EnableReceiveStamps(int fd);

class ReceiveProbe {
 public:
  ReceiveProbe();
  ~ReceiveProbe();
  ReceiveProbe(const ReceiveProbe&) = delete;
  ReceiveProbe& operator=(const ReceiveProbe&) = delete;

  // Stamps the bytes queued on `fd` now. A probe that cannot prove its stamp (no stamp, a queue
  // larger than the peek buffer, bytes landing during the peek) is spent at once.
  void Peek(int fd);

  // In a read's callback on `fd`, `t` being the callback's own clock: the peek's stamp (never
  // later than `t`) while no byte has landed since the peek, else 0.
  MonoNs Confirm(int fd, MonoNs t);

  // Spends the probe (a timer action reads no socket it peeked).
  void Clear() { fd_ = -1; }

 private:
  int fd_ = -1;
  MonoNs stamp_ = 0;
  uint64_t received_ = 0;
  std::vector<char> buf_;
  int keeper_ = -1;  // keeps the kernel's stamping on
};

}  // namespace capq::internal
