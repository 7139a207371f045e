#include "runtime/stop.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "core/errors.h"
#include "core/logging.h"
#include "debugger/step_tap.h"
#include "strata/group.h"
#include "strata/rules.h"
#include "strata/runtime.h"

namespace strata::runtime {
namespace {

std::atomic<int> signalCause{0};  // the signal number, set from a handler
std::atomic<int> requestCause{static_cast<int>(StopCause::kNone)};
std::mutex textMutex;
std::string requestText;
// The cause every rank agreed on at the last should_stop() that returned true.
std::atomic<int> agreedCause{static_cast<int>(StopCause::kNone)};
// With a rule cause: which rule, where, and why (shared by the rank that found it).
std::mutex agreedMutex;
AgreedRule agreed;

// The stop file rank 0 watches (set at init, cleared at finalize, read by should_stop).
struct StopFileWatch {
  std::string path;           // empty: not watching
  int64_t sinceWallMs = 0;    // files older than this (minus the slack) are leftovers
  int64_t intervalMs = 500;
  int64_t lastCheckMs = INT64_MIN / 2;
};
std::mutex watchMutex;
StopFileWatch watch;

int64_t steadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t wallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The watcher's file names the rule and the step: a rule request like an in-process one.
void requestStopFromFile(const std::string& content, const std::string& path) {
  try {
    const nlohmann::json j = nlohmann::json::parse(content);
    if (j.is_object() && j.contains("rule") && j["rule"].is_string()) {
      const std::string reason = j.contains("reason") && j["reason"].is_string() ? j["reason"].get<std::string>() : "";
      const int64_t step = j.contains("step") && j["step"].is_number_integer() ? j["step"].get<int64_t>() : -1;
      rules::StopSignal::global().request(j["rule"].get<std::string>(), reason + " (stop file " + path + ")", step);
      return;
    }
  } catch (const std::exception&) {
    // Not JSON (e.g. made with touch): still a request to stop.
  }
  requestStop(StopCause::kRule, stopFileRequestText(content, path));
}

// Rank 0, at most every interval: a current stop file becomes a kRule request.
void pollStopFile() {
  std::string path;
  int64_t since = 0;
  {
    std::lock_guard<std::mutex> lock(watchMutex);
    if (watch.path.empty()) return;
    const int64_t now = steadyMs();
    if (!stopFileCheckDue(now, watch.lastCheckMs, watch.intervalMs)) return;
    watch.lastCheckMs = now;
    path = watch.path;
    since = watch.sinceWallMs;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  const int64_t mtimeMs = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
  if (!stopFileIsCurrent(mtimeMs, since)) return;
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  requestStopFromFile(content.str(), path);
  // Found: no need to look again in this run.
  std::lock_guard<std::mutex> lock(watchMutex);
  watch.path.clear();
}

// This rank's rule request as an allreduce key (kNoRuleKey: none, or none with a step).
int64_t localRuleKey() {
  const rules::StopSignal& s = rules::StopSignal::global();
  if (!s.requested() || s.step() < 0 || !isInitialized()) return kNoRuleKey;
  return encodeRuleKey(s.step(), rank());
}

// Every rank learns the winning rule request from the rank that made it (one broadcast, at
// the stop only). Layout: rule, '\n', reason, NUL-padded.
constexpr size_t kVerdictBytes = 1024;
void shareRuleVerdict(int64_t key) {
  AgreedRule a;
  if (!decodeRuleKey(key, &a.step, &a.rank)) return;
  std::vector<char> buf(kVerdictBytes, 0);
  if (rank() == a.rank) {
    const std::string text = rules::StopSignal::global().rule() + "\n" + rules::StopSignal::global().reason();
    std::copy_n(text.begin(), std::min(text.size(), kVerdictBytes - 1), buf.begin());
  }
  world().broadcast(buf.data(), buf.size(), DType::kUInt8, a.rank);
  const std::string text(buf.data());
  const size_t nl = text.find('\n');
  a.rule = text.substr(0, nl);
  a.reason = nl == std::string::npos ? "" : text.substr(nl + 1);
  std::lock_guard<std::mutex> lock(agreedMutex);
  agreed = a;
}

}  // namespace

int64_t encodeRuleKey(int64_t step, int rank) { return -(step * kRuleKeyRankSpan + rank); }

bool decodeRuleKey(int64_t key, int64_t* step, int* rank) {
  if (key == kNoRuleKey || key > 0) return false;
  *step = (-key) / kRuleKeyRankSpan;
  *rank = static_cast<int>((-key) % kRuleKeyRankSpan);
  return true;
}

AgreedRule agreedRule() {
  std::lock_guard<std::mutex> lock(agreedMutex);
  return agreed;
}

void stepDataComplete() {
  if (auto tap = debugger::stepTap()) tap->stepsComplete();
}

std::string stopFileRequestText(const std::string& content, const std::string& path) {
  try {
    const nlohmann::json j = nlohmann::json::parse(content);
    if (j.is_object() && j.contains("rule") && j["rule"].is_string()) {
      std::string text = "rule " + j["rule"].get<std::string>();
      if (j.contains("reason") && j["reason"].is_string()) text += ": " + j["reason"].get<std::string>();
      return text + " (stop file " + path + ")";
    }
  } catch (const std::exception&) {
    // Not JSON (e.g. made with touch): still a request to stop.
  }
  return "stop file " + path;
}

void watchStopFile(const std::string& outputDir, int64_t intervalMs) {
  std::lock_guard<std::mutex> lock(watchMutex);
  watch = StopFileWatch{};
  if (outputDir.empty()) return;
  watch.path = rules::StopSignal::stopFilePath(outputDir);
  watch.sinceWallMs = wallMs();
  watch.intervalMs = intervalMs;
}

const char* stopCauseName(StopCause cause) {
  switch (cause) {
    case StopCause::kNone: return "none";
    case StopCause::kUser: return "user";
    case StopCause::kRule: return "rule";
    case StopCause::kSignal: return "signal";
  }
  return "none";
}

void requestStopFromSignal(int signo) {
  int expected = 0;
  signalCause.compare_exchange_strong(expected, signo);
}

void requestStop(StopCause cause, const std::string& why) {
  std::lock_guard<std::mutex> lock(textMutex);
  int expected = static_cast<int>(StopCause::kNone);
  if (requestCause.compare_exchange_strong(expected, static_cast<int>(cause))) requestText = why;
}

StopCause localStopCause() {
  // The strongest cause, as across ranks.
  if (signalCause.load() != 0) return StopCause::kSignal;
  int cause = requestCause.load();
  if (rules::StopSignal::global().requested()) cause = std::max(cause, static_cast<int>(StopCause::kRule));
  return static_cast<StopCause>(cause);
}

int stopSignalNumber() { return signalCause.load(); }

void resetStop() {
  signalCause = 0;
  requestCause = static_cast<int>(StopCause::kNone);
  agreedCause = static_cast<int>(StopCause::kNone);
  {
    std::lock_guard<std::mutex> alock(agreedMutex);
    agreed = AgreedRule{};
  }
  {
    std::lock_guard<std::mutex> wlock(watchMutex);
    watch.lastCheckMs = INT64_MIN / 2;
  }
  std::lock_guard<std::mutex> lock(textMutex);
  requestText.clear();
}

void endStopRun() {
  watchStopFile("");
  requestCause = static_cast<int>(StopCause::kNone);
  agreedCause = static_cast<int>(StopCause::kNone);
  {
    std::lock_guard<std::mutex> alock(agreedMutex);
    agreed = AgreedRule{};
  }
  rules::StopSignal::global().reset();
  std::lock_guard<std::mutex> lock(textMutex);
  requestText.clear();
}

}  // namespace strata::runtime

namespace strata {

bool should_stop() {
  // Sticky: every rank set agreedCause at the same call, so every rank skips the allreduce
  // from here on alike (a loop and the loop around it may both ask).
  if (runtime::agreedCause.load() != 0) return true;
  // The step's debugger data is complete: the in-process rules may look at it while the
  // next step runs; their verdict travels with a later call's allreduce.
  runtime::stepDataComplete();
  runtime::pollStopFile();
  // [0]: the cause (the strongest wins everywhere); [1]: the earliest rule request's key.
  int64_t vote[2] = {static_cast<int64_t>(runtime::localStopCause()), runtime::localRuleKey()};
  const bool collective = isInitialized() && size() > 1;
  if (collective) {
    // Every rank calls this at the same step boundary. A rank that died or stopped calling
    // makes this throw (collective timeout or abort), never hang.
    world().allreduce(vote, vote, 2, DType::kInt64, ReduceOp::kMax);
  }
  const int cause = static_cast<int>(vote[0]);
  if (cause == 0) return false;
  if (cause == static_cast<int>(runtime::StopCause::kRule) && vote[1] != runtime::kNoRuleKey) {
    if (collective) {
      runtime::shareRuleVerdict(vote[1]);
    } else {
      std::lock_guard<std::mutex> lock(runtime::agreedMutex);
      runtime::agreed = {rules::StopSignal::global().rule(), rules::StopSignal::global().reason(),
                         rules::StopSignal::global().step(), isInitialized() ? rank() : 0};
    }
  }
  int expected = 0;
  if (runtime::agreedCause.compare_exchange_strong(expected, cause)) {
    const runtime::AgreedRule a = runtime::agreedRule();
    if (!a.rule.empty() && (!isInitialized() || rank() == 0))
      STRATA_LOG(kWarn, kRules, "StopTraining: ", a.rule, " found an issue at step ", a.step, " (rank ", a.rank,
                 "): ", a.reason);
    STRATA_LOG(kWarn, kInit, "stopping at this step boundary: ", stop_reason());
  }
  return true;
}

std::string stop_reason() {
  using runtime::StopCause;
  auto cause = static_cast<StopCause>(runtime::agreedCause.load());
  if (cause == StopCause::kNone) cause = runtime::localStopCause();
  switch (cause) {
    case StopCause::kNone: return "";
    case StopCause::kSignal: {
      int signo = runtime::stopSignalNumber();
      if (signo == 0) return "a signal on another rank";
      const char* name = strsignal(signo);
      return std::string("signal ") + (name ? name : std::to_string(signo));
    }
    case StopCause::kRule: {
      const runtime::AgreedRule a = runtime::agreedRule();
      if (!a.rule.empty())
        return "rule " + a.rule + ": " + a.reason + " (step " + std::to_string(a.step) + ", rank " +
               std::to_string(a.rank) + ")";
      auto& s = rules::StopSignal::global();
      if (s.requested()) return "rule " + s.rule() + ": " + s.reason();
      std::lock_guard<std::mutex> lock(runtime::textMutex);
      return runtime::requestText.empty() ? "a rule on another rank" : runtime::requestText;
    }
    case StopCause::kUser: {
      std::lock_guard<std::mutex> lock(runtime::textMutex);
      return runtime::requestText.empty() ? "requested on another rank" : runtime::requestText;
    }
  }
  return "";
}

}  // namespace strata
