// Readable sockets of the load generator's loop, in the order the loop first saw them readable,
// each with that moment: the stamp a read's events get (SseEvent::wake_ns, loadgen.h).
#pragma once

#include <curl/curl.h>
#include <sys/epoll.h>

#include <deque>
#include <vector>

#include "capq/clock.h"

namespace capq::internal {

class ReadyQueue {
 public:
  // One epoll answer, taken at `t`: a socket not queued yet joins the end stamped `t`; one already
  // queued keeps its place and stamp and gains the new flags.
  void Take(const epoll_event* evs, int n, MonoNs t) {
    for (int i = 0; i < n; ++i) {
      const int fd = evs[i].data.fd;
      if (fd < 0) continue;
      if (static_cast<size_t>(fd) >= by_fd_.size()) by_fd_.resize(static_cast<size_t>(fd) + 1);
      Entry& e = by_fd_[static_cast<size_t>(fd)];
      e.flags |= CurlFlags(evs[i].events);
      if (e.queued) continue;
      e.queued = true;
      e.since = t;
      order_.push_back(fd);
    }
  }
  // The oldest readable socket, its curl flags and when it was first seen readable.
  bool Pop(int* fd, int* flags, MonoNs* since) {
    if (order_.empty()) return false;
    *fd = order_.front();
    order_.pop_front();
    Entry& e = by_fd_[static_cast<size_t>(*fd)];
    *flags = e.flags;
    *since = e.since;
    e = Entry{};
    return true;
  }
  bool empty() const { return order_.empty(); }

 private:
  struct Entry {
    int flags = 0;
    MonoNs since = 0;
    bool queued = false;
  };
  static int CurlFlags(uint32_t events) {
    int flags = 0;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) flags |= CURL_CSELECT_IN;
    if (events & EPOLLOUT) flags |= CURL_CSELECT_OUT;
    if (events & EPOLLERR) flags |= CURL_CSELECT_ERR;
    return flags;
  }
  std::vector<Entry> by_fd_;
  std::deque<int> order_;
};

}  // namespace capq::internal
