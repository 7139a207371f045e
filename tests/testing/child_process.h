// ChildProcess: a command run in its own process group with its output in a file, for
// tests that drive launchers (mpirun, `strata run`) and signal them or their ranks.
//
// Threading: one thread uses a ChildProcess. The destructor kills the whole process group
// if the command is still running (a failed test leaves nothing behind).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace strata::testing {

class ChildProcess {
 public:
  // Starts argv[0] (a path) with stdout and stderr appended to `logPath`.
  ChildProcess(const std::vector<std::string>& argv, const std::string& logPath);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  // Sends `signo` to the command itself (not its group).
  void signal(int signo);
  // Waits for the end; kills the group and returns false after `limit`. *code: the exit
  // code, or 128 + the signal that ended it.
  bool wait(std::chrono::milliseconds limit, int* code);
  std::string output() const;

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string logPath_;
};

// Waits until `path` exists, `child` ended, or `limit` passed; whether it exists.
bool waitForFile(const std::string& path, ChildProcess& child, std::chrono::milliseconds limit);
std::string readWholeFile(const std::string& path);
// The value after "<key>=" on the last line of `text` that starts with `prefix`; "" if none.
std::string lastValueOf(const std::string& text, const std::string& prefix, const std::string& key);

}  // namespace strata::testing
