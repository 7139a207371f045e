#include "core/logging.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <vector>

#include "core/rank_tag.h"

namespace strata {
namespace {

struct LogState {
  std::atomic<int> level{static_cast<int>(LogLevel::kWarn)};
  std::atomic<uint32_t> subsys{kAllSubsys};
  std::atomic<bool> rankEnabled{true};
  std::mutex fileMutex;
  FILE* out = stderr;
  std::string host = "?";
};

const char* envOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : fallback;
}

LogState& state() {
  static LogState* s = [] {
    auto* st = new LogState();  // leaked on purpose: logging works during static destruction
    LogLevel level;
    if (parseLogLevel(envOr("STRATA_LOG_LEVEL", "WARN"), &level)) st->level = static_cast<int>(level);
    std::string unknown;
    st->subsys = parseSubsysMask(envOr("STRATA_LOG_SUBSYS", ""), &unknown);
    char host[256] = {0};
    if (gethostname(host, sizeof(host) - 1) == 0) st->host = host;
    return st;
  }();
  return *s;
}

const char* levelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "E";
    case LogLevel::kWarn: return "W";
    case LogLevel::kInfo: return "I";
    case LogLevel::kDebug: return "D";
    case LogLevel::kTrace: return "T";
  }
  return "?";
}

const char* subsysName(uint32_t subsys) {
  static const char* names[] = {"init", "coll", "p2p", "shm", "net", "pipe", "prof", "rules", "config"};
  for (int i = 0; i < 9; ++i)
    if (subsys == (1u << i)) return names[i];
  return "all";
}

std::string expandPath(const std::string& pattern, int rank, const std::string& host) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      const char c = pattern[++i];
      if (c == 'h') out += host;
      else if (c == 'p') out += std::to_string(getpid());
      else if (c == 'r') out += std::to_string(rank);
      else out += c;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

}  // namespace

bool parseLogLevel(const std::string& text, LogLevel* out) {
  static const char* names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
  for (int i = 0; i < 5; ++i) {
    if (strcasecmp(text.c_str(), names[i]) == 0) {
      *out = static_cast<LogLevel>(i);
      return true;
    }
  }
  return false;
}

uint32_t parseSubsysMask(const std::string& text, std::string* unknown) {
  if (text.empty() || strcasecmp(text.c_str(), "ALL") == 0) return kAllSubsys;
  static const char* names[] = {"INIT", "COLL", "P2P", "SHM", "NET", "PIPE", "PROF", "RULES", "CONFIG"};
  uint32_t mask = 0;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    bool found = false;
    for (int i = 0; i < 9; ++i) {
      if (strcasecmp(item.c_str(), names[i]) == 0) {
        mask |= 1u << i;
        found = true;
      }
    }
    if (!found && unknown) *unknown += (unknown->empty() ? "" : ",") + item;
  }
  return mask;
}

bool logEnabled(LogLevel level, uint32_t subsys) {
  const LogState& s = state();
  if (static_cast<int>(level) > s.level.load(std::memory_order_relaxed)) return false;
  if (level == LogLevel::kError) return true;  // errors are never filtered away by subsystem
  return (s.subsys.load(std::memory_order_relaxed) & subsys) != 0 &&
         s.rankEnabled.load(std::memory_order_relaxed);
}

void logLine(LogLevel level, uint32_t subsys, const char* file, int line, const std::string& msg) {
  LogState& s = state();
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  const long tid = static_cast<long>(syscall(SYS_gettid));
  std::string text = c10::str("[strata ", rankTag().substr(1, rankTag().size() - 2), " ", s.host,
                              ":", getpid(), ":", tid, "] ", levelLetter(level), " ",
                              subsysName(subsys), " ", base, ":", line, " | ", msg, "\n");
  std::lock_guard<std::mutex> lock(s.fileMutex);
  std::fwrite(text.data(), 1, text.size(), s.out);
  std::fflush(s.out);
}

namespace {
bool envSet(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}
}  // namespace

void applyLogDefaults(const LogDefaults& defaults, int rank, const std::string& host) {
  LogState& s = state();
  LogLevel level;
  if (!envSet("STRATA_LOG_LEVEL") && parseLogLevel(defaults.level, &level)) s.level = static_cast<int>(level);
  if (!envSet("STRATA_LOG_SUBSYS") && !defaults.subsys.empty()) s.subsys = parseSubsysMask(defaults.subsys, nullptr);
  if (!envSet("STRATA_LOG_RANKS") && !defaults.ranks.empty()) {
    bool enabled = false;
    for (int r : defaults.ranks) enabled = enabled || r == rank;
    s.rankEnabled = enabled;
  }
  if (!envSet("STRATA_LOG_FILE") && !defaults.file.empty()) {
    std::lock_guard<std::mutex> lock(s.fileMutex);
    if (FILE* f = std::fopen(expandPath(defaults.file, rank, host).c_str(), "a")) s.out = f;
  }
}

void configureLogging(int rank, const std::string& host) {
  LogState& s = state();
  s.host = host;
  const char* ranks = std::getenv("STRATA_LOG_RANKS");
  if (ranks && *ranks) {
    bool enabled = false;
    std::stringstream ss(ranks);
    std::string item;
    while (std::getline(ss, item, ','))
      if (!item.empty() && std::atoi(item.c_str()) == rank) enabled = true;
    s.rankEnabled = enabled;
  }
  const char* file = std::getenv("STRATA_LOG_FILE");
  if (file && *file) {
    std::lock_guard<std::mutex> lock(s.fileMutex);
    FILE* f = std::fopen(expandPath(file, rank, host).c_str(), "a");
    if (f) s.out = f;
  }
}

}  // namespace strata
