#include "rules/actions.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>

#include <vector>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "core/atomic_file.h"
#include "core/logging.h"

namespace strata::rules {

// ---------------------------------------------------------------------------------------------
// StopSignal

StopSignal& StopSignal::global() {
  static StopSignal signal;
  return signal;
}

void StopSignal::request(const std::string& rule, const std::string& reason, int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!requested_.load(std::memory_order_relaxed)) {
    rule_ = rule;
    reason_ = reason;
    step_ = step;
  }
  requested_.store(true, std::memory_order_release);
}

std::string StopSignal::rule() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rule_;
}

std::string StopSignal::reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reason_;
}

int64_t StopSignal::step() const {
  std::lock_guard<std::mutex> lock(mu_);
  return step_;
}

void StopSignal::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  requested_.store(false, std::memory_order_release);
  rule_.clear();
  reason_.clear();
  step_ = -1;
}

std::string StopSignal::stopFilePath(const std::string& runDir) {
  return (std::filesystem::path(runDir) / "rule-output" / "stop_training.json").string();
}

bool StopSignal::stopFileExists(const std::string& runDir) {
  std::error_code ec;
  return std::filesystem::exists(stopFilePath(runDir), ec);
}

bool StopSignal::writeStopFile(const std::string& runDir, const std::string& rule, const std::string& reason,
                               int64_t step) {
  nlohmann::json j = {{"rule", rule}, {"reason", reason}};
  if (step >= 0) j["step"] = step;
  return tryWriteFileAtomically(stopFilePath(runDir), j.dump() + "\n", Durability::kAtomicOnly);
}

// ---------------------------------------------------------------------------------------------
// Actions

namespace {

class StopTrainingAction final : public Action {
 public:
  std::string name() const override { return "StopTraining"; }
  void run(const Finding& f, const ActionContext& ctx) override {
    const bool first = !StopSignal::global().requested();
    StopSignal::global().request(f.rule, f.message, f.step);
    if (ctx.writeStopFile && !ctx.runDir.empty() && !StopSignal::stopFileExists(ctx.runDir) &&
        !StopSignal::writeStopFile(ctx.runDir, f.rule, f.message, f.step)) {
      STRATA_LOG(kError, kRules, "StopTraining: cannot write ", StopSignal::stopFilePath(ctx.runDir));
    }
    if (first) STRATA_LOG(kWarn, kRules, "rule ", f.rule, " requests StopTraining: ", f.message);
  }
};

class LogAction final : public Action {
 public:
  std::string name() const override { return "log"; }
  void run(const Finding& f, const ActionContext&) override {
    STRATA_LOG(kWarn, kRules, "rule ", f.rule, f.step >= 0 ? " at step " + std::to_string(f.step) : std::string(),
               ": ", f.message);
  }
};

class CommandAction final : public Action {
 public:
  CommandAction(std::string command, std::chrono::milliseconds timeout, int maxRuns)
      : command_(std::move(command)), timeout_(timeout), maxRuns_(maxRuns) {}
  std::string name() const override { return "command"; }
  void run(const Finding& f, const ActionContext& ctx) override {
    if (runs_ >= maxRuns_) {
      if (runs_++ == maxRuns_)
        STRATA_LOG(kWarn, kRules, "rule ", f.rule, ": command action ran ", maxRuns_, " times; not running it again");
      return;
    }
    ++runs_;
    const CommandResult r =
        runCommand(command_, f.toJson().dump() + "\n", timeout_, {{"STRATA_RULE", f.rule}, {"STRATA_RUN_DIR", ctx.runDir}});
    if (r.timedOut) {
      STRATA_LOG(kWarn, kRules, "rule ", f.rule, ": command \"", command_, "\" killed after ", timeout_.count(), " ms");
    } else if (!r.error.empty()) {
      STRATA_LOG(kWarn, kRules, "rule ", f.rule, ": command \"", command_, "\" failed: ", r.error);
    } else if (r.exitCode != 0) {
      STRATA_LOG(kWarn, kRules, "rule ", f.rule, ": command \"", command_, "\" exited with ", r.exitCode);
    }
  }

 private:
  std::string command_;
  std::chrono::milliseconds timeout_;
  int maxRuns_;
  int runs_ = 0;
};

}  // namespace

std::unique_ptr<Action> makeStopTrainingAction() { return std::make_unique<StopTrainingAction>(); }
std::unique_ptr<Action> makeLogAction() { return std::make_unique<LogAction>(); }
std::unique_ptr<Action> makeCommandAction(std::string command, std::chrono::milliseconds timeout, int maxRuns) {
  return std::make_unique<CommandAction>(std::move(command), timeout, maxRuns);
}

std::unique_ptr<Action> parseAction(const nlohmann::json& spec) {
  if (spec.is_string()) {
    const std::string s = spec.get<std::string>();
    if (s == "StopTraining") return makeStopTrainingAction();
    if (s == "log" || s == "Log") return makeLogAction();
    throw std::invalid_argument("unknown action \"" + s + "\" (StopTraining, log, or {\"command\": ...})");
  }
  if (spec.is_object() && spec.contains("command")) {
    double timeoutS = 10;
    int maxRuns = 10;
    for (const auto& item : spec.items()) {
      if (item.key() == "command") {
        if (!item.value().is_string() || item.value().get<std::string>().empty())
          throw std::invalid_argument("action \"command\" must be a non-empty string");
      } else if (item.key() == "timeout_s") {
        if (!item.value().is_number() || item.value().get<double>() <= 0)
          throw std::invalid_argument("action \"timeout_s\" must be a positive number");
        timeoutS = item.value().get<double>();
      } else if (item.key() == "max_runs") {
        if (!item.value().is_number_integer() || item.value().get<int>() < 1)
          throw std::invalid_argument("action \"max_runs\" must be an integer >= 1");
        maxRuns = item.value().get<int>();
      } else {
        throw std::invalid_argument("unknown key \"" + item.key() + "\" in a command action (command, timeout_s, max_runs)");
      }
    }
    return makeCommandAction(spec.at("command").get<std::string>(),
                             std::chrono::milliseconds(static_cast<int64_t>(timeoutS * 1000)), maxRuns);
  }
  throw std::invalid_argument("an action is \"StopTraining\", \"log\" or {\"command\": ...}, got " + spec.dump());
}

CommandResult runCommand(const std::string& command, const std::string& stdinText, std::chrono::milliseconds timeout,
                         const std::vector<std::pair<std::string, std::string>>& env) {
  CommandResult result;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    result.error = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  // Everything the child needs is built before fork(): after it, only async-signal-safe calls.
  std::vector<std::string> envStrings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    bool overridden = false;
    for (const auto& [k, v] : env) overridden |= kv.compare(0, k.size() + 1, k + "=") == 0;
    if (!overridden) envStrings.push_back(kv);
  }
  for (const auto& [k, v] : env) envStrings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : envStrings) envp.push_back(s.data());
  envp.push_back(nullptr);
  const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
  const pid_t pid = fork();
  if (pid < 0) {
    result.error = std::string("fork: ") + std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return result;
  }
  if (pid == 0) {
    setpgid(0, 0);
    dup2(fds[0], STDIN_FILENO);
    execve("/bin/sh", const_cast<char* const*>(argv), envp.data());
    _exit(127);
  }
  setpgid(pid, pid);
  close(fds[0]);
  // The command may not read stdin: block SIGPIPE on this thread only (other threads keep their
  // disposition), and swallow any our writes raise before unblocking.
  sigset_t pipeSet, oldMask;
  sigemptyset(&pipeSet);
  sigaddset(&pipeSet, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipeSet, &oldMask);
  const char* p = stdinText.data();
  size_t left = stdinText.size();
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  bool exited = false;
  while (std::chrono::steady_clock::now() < deadline) {
    if (left > 0) {
      const ssize_t n = write(fds[1], p, left);
      if (n > 0) {
        p += n;
        left -= static_cast<size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        left = 0;  // the command closed stdin
      }
      if (left == 0) close(fds[1]), fds[1] = -1;
    }
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (fds[1] >= 0) close(fds[1]);
  const struct timespec zero {0, 0};
  while (sigtimedwait(&pipeSet, nullptr, &zero) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &oldMask, nullptr);
  if (!exited) {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    result.timedOut = true;
    return result;
  }
  if (WIFEXITED(status)) {
    result.exitCode = WEXITSTATUS(status);
  } else {
    result.error = "terminated by signal " + std::to_string(WTERMSIG(status));
  }
  return result;
}

}  // namespace strata::rules
