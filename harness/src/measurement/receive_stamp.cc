#include "receive_stamp.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>

namespace capq::internal {
namespace {

// A whole burst of chunks fits; a socket with more queued than this gets no kernel stamp.
constexpr size_t kPeekBytes = 64 * 1024;

// The socket's count of bytes received (TCP_INFO's tcpi_bytes_received, Linux 4.1+); false when
// the kernel does not report it.
bool BytesReceived(int fd, uint64_t* out) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  if (len < offsetof(tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received) return false;
  *out = info.tcpi_bytes_received;
  return true;
}

int64_t ClockNs(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

bool EnableReceiveStamps(int fd) {
  const int on = 1;
  return setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on) == 0;
}

ReceiveProbe::ReceiveProbe() : buf_(kPeekBytes) {
  keeper_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (keeper_ >= 0) (void)EnableReceiveStamps(keeper_);
}

ReceiveProbe::~ReceiveProbe() {
  if (keeper_ >= 0) close(keeper_);
}

void ReceiveProbe::Peek(int fd) {
  fd_ = -1;
  uint64_t before = 0, after = 0;
  if (!BytesReceived(fd, &before)) return;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
  iovec iov{buf_.data(), buf_.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = recvmsg(fd, &msg, MSG_PEEK | MSG_DONTWAIT);
  // The kernel stamps in CLOCK_REALTIME; read both clocks at once to carry it over.
  const int64_t real = ClockNs(CLOCK_REALTIME);
  const MonoNs mono = NowNs();
  if (n <= 0 || static_cast<size_t>(n) >= buf_.size()) return;
  if (!BytesReceived(fd, &after) || after != before) return;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPNS) continue;
    timespec ts{};
    std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
    const int64_t stamp_real = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    if (stamp_real <= 0) return;
    stamp_ = mono - (real - stamp_real);
    received_ = after;
    fd_ = fd;
    return;
  }
}

MonoNs ReceiveProbe::Confirm(int fd, MonoNs t) {
  if (fd < 0 || fd != fd_) return 0;
  uint64_t now = 0;
  if (!BytesReceived(fd, &now) || now != received_) {
    fd_ = -1;
    return 0;
  }
  return stamp_ < t ? stamp_ : t;
}

}  // namespace capq::internal
