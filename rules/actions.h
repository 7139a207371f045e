// What happens when a rule finds something: StopTraining (the flag the runtime polls, and the
// stop file for out-of-process engines), log (a WARN line), and command (a user program with
// the finding as JSON on stdin, killed after a timeout). Findings are always logged at INFO
// and written to rule-output/ whatever the actions.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "strata/rules.h"

namespace strata::rules {

struct ActionContext {
  std::string runDir;          // where rule-output/ lives; "" when not writing files
  bool writeStopFile = false;  // StopTraining also writes the stop file (strata rules --watch)
};

// Runs on the engine's thread; must not throw (failures are logged).
class Action {
 public:
  virtual ~Action() = default;
  virtual std::string name() const = 0;
  virtual void run(const Finding& finding, const ActionContext& ctx) = 0;
};

std::unique_ptr<Action> makeStopTrainingAction();
std::unique_ptr<Action> makeLogAction();
// `command` runs under /bin/sh -c with the finding's JSON on stdin and STRATA_RULE,
// STRATA_RUN_DIR set; it is killed (with its process group) after `timeout`. At most
// `maxRuns` runs per rule, so a rule that fires every window does not flood an alert channel.
std::unique_ptr<Action> makeCommandAction(std::string command, std::chrono::milliseconds timeout, int maxRuns);

// "StopTraining" | "log" | {"command": "...", "timeout_s": 10, "max_runs": 10}. Throws
// std::invalid_argument naming the problem.
std::unique_ptr<Action> parseAction(const nlohmann::json& spec);

// Result of running a command (for tests): exit status, or -1 when it timed out or failed.
struct CommandResult {
  int exitCode = -1;
  bool timedOut = false;
  std::string error;
};
CommandResult runCommand(const std::string& command, const std::string& stdinText, std::chrono::milliseconds timeout,
                         const std::vector<std::pair<std::string, std::string>>& env);

}  // namespace strata::rules
