// A write to a socket whose peer has gone raises SIGPIPE, whose default action ends the
// process: under the guard it fails with EPIPE instead, nothing stays pending, errno is the
// write's and the thread's signal mask is as before.
#include "core/sigpipe_guard.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace strata {
namespace {

bool sigpipeBlocked() {
  sigset_t mask;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  return sigismember(&mask, SIGPIPE) == 1;
}

TEST(SigpipeGuard, AWriteToAClosedSocketFailsWithEpipeAndTheProcessLives) {
  ASSERT_EQ(signal(SIGPIPE, SIG_DFL), SIG_DFL) << "the test needs SIGPIPE's default action (it ends the process)";
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  close(fds[1]);
  const bool blockedBefore = sigpipeBlocked();
  ssize_t n = 0;
  int writeErrno = 0;
  {
    SigpipeGuard guard;
    const char byte = 'x';
    n = write(fds[0], &byte, 1);  // without the guard: SIGPIPE, the test binary dies here
    writeErrno = errno;
  }
  const int errnoAfter = errno;
  close(fds[0]);
  EXPECT_EQ(n, -1);
  EXPECT_EQ(writeErrno, EPIPE);
  EXPECT_EQ(errnoAfter, EPIPE) << "the guard's own calls must not change errno";
  EXPECT_EQ(sigpipeBlocked(), blockedBefore);
  sigset_t pending;
  sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0) << "the raised SIGPIPE was left pending";
}

}  // namespace
}  // namespace strata
