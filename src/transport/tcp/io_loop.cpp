#include "transport/tcp/io_loop.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "core/errors.h"
#include "core/logging.h"
#include "core/rank_tag.h"
#include "transport/tcp/connection.h"

namespace strata::transport::tcp {
namespace {

// Events handled per epoll_wait; more simply wait for the next round.
constexpr int kMaxEvents = 64;

}  // namespace

IoLoop::IoLoop(int rank, int worldSize)
    : epollFd_(::epoll_create1(EPOLL_CLOEXEC)), wakeFd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  STRATA_CHECK_NET(epollFd_.valid() && wakeFd_.valid(),
                   "tcp I/O loop: epoll/eventfd creation failed: ", errnoText(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeId;
  STRATA_CHECK_NET(::epoll_ctl(epollFd_.get(), EPOLL_CTL_ADD, wakeFd_.get(), &ev) == 0,
                   "tcp I/O loop: epoll_ctl(eventfd) failed: ", errnoText(errno));
  thread_ = std::thread([this, rank, worldSize] { run(rank, worldSize); });
}

IoLoop::~IoLoop() { stop(); }

void IoLoop::add(const std::shared_ptr<ConnectionCore>& core) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    STRATA_CHECK_NET(!stopped_, "tcp I/O loop: cannot add the connection to rank ", core->peer(),
                     " to a stopped transport");
    cores_[core->id()] = core;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.u64 = core->id();
  if (::epoll_ctl(epollFd_.get(), EPOLL_CTL_ADD, core->fd(), &ev) != 0) {
    const int err = errno;
    remove(core->id());
    STRATA_THROW(NetworkError, "tcp I/O loop: epoll_ctl(ADD) for the connection to rank ",
                 core->peer(), " failed: ", errnoText(err));
  }
}

void IoLoop::remove(uint64_t id) {
  std::shared_ptr<ConnectionCore> core;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cores_.find(id);
    if (it == cores_.end()) return;
    core = std::move(it->second);
    cores_.erase(it);
  }
  ::epoll_ctl(epollFd_.get(), EPOLL_CTL_DEL, core->fd(), nullptr);  // the core is still open
}

void IoLoop::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  stopping_.store(true);
  const uint64_t one = 1;
  if (::write(wakeFd_.get(), &one, sizeof(one)) < 0) {
    STRATA_LOG(kError, kNet, "tcp I/O loop: cannot wake the I/O thread: ", errnoText(errno));
  }
  if (thread_.joinable()) thread_.join();
  closeAll("the Transport was destroyed");
}

void IoLoop::closeAll(const std::string& why) {
  std::unordered_map<uint64_t, std::shared_ptr<ConnectionCore>> cores;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cores.swap(cores_);
  }
  for (auto& entry : cores) entry.second->close(why);
}

void IoLoop::run(int rank, int worldSize) {
  pthread_setname_np(pthread_self(), "strata-tcp-io");
  setThreadRankTag(rank, worldSize);
  try {
    loop();
  } catch (const std::exception& e) {
    STRATA_LOG(kError, kNet, "tcp I/O thread failed: ", e.what());
    closeAll(std::string("the tcp I/O thread failed: ") + e.what());
  } catch (...) {
    STRATA_LOG(kError, kNet, "tcp I/O thread failed with an unknown exception");
    closeAll("the tcp I/O thread failed");
  }
}

void IoLoop::loop() {
  epoll_event events[kMaxEvents];
  while (!stopping_.load()) {
    const int n = ::epoll_wait(epollFd_.get(), events, kMaxEvents, -1);
    if (n < 0) {
      STRATA_CHECK_NET(errno == EINTR, "tcp I/O loop: epoll_wait failed: ", errnoText(errno));
      continue;
    }
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == kWakeId) {
        uint64_t count = 0;
        if (::read(wakeFd_.get(), &count, sizeof(count)) < 0) { /* EAGAIN: already drained */
        }
        continue;
      }
      std::shared_ptr<ConnectionCore> core;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = cores_.find(events[i].data.u64);
        if (it != cores_.end()) core = it->second;
      }
      if (core) core->onEvents(events[i].events);
    }
  }
}

}  // namespace strata::transport::tcp
