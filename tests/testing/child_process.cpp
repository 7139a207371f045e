#include "testing/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace strata::testing {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::string& logPath) : logPath_(logPath) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, logPath.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int rc = posix_spawn(&pid_, argv.at(0).c_str(), &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw std::runtime_error("posix_spawn " + argv[0] + ": " + std::strerror(rc));
}

ChildProcess::~ChildProcess() {
  if (reaped_) return;
  ::kill(-pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
}

bool ChildProcess::running() {
  if (reaped_) return false;
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
}

void ChildProcess::signal(int signo) {
  if (!reaped_) ::kill(pid_, signo);
}

bool ChildProcess::wait(milliseconds limit, int* code) {
  const auto deadline = Clock::now() + limit;
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) != pid_) {
    if (Clock::now() > deadline) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      reaped_ = true;
      *code = -1;
      return false;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  reaped_ = true;
  *code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  return true;
}

std::string ChildProcess::output() const { return readWholeFile(logPath_); }

bool waitForFile(const std::string& path, ChildProcess& child, milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!std::filesystem::exists(path) && child.running() && Clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(10));
  return std::filesystem::exists(path);
}

std::string readWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string lastValueOf(const std::string& text, const std::string& prefix, const std::string& key) {
  std::string found;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    const size_t at = line.find(key + "=");
    if (at == std::string::npos) continue;
    found = line.substr(at + key.size() + 1);
    found = found.substr(0, found.find(' '));
  }
  return found;
}

}  // namespace strata::testing
