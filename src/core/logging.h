// Rank-prefixed logging filtered by level, subsystem and rank (NCCL_DEBUG style).
//
//   STRATA_LOG_LEVEL=ERROR|WARN|INFO|DEBUG|TRACE   (default WARN)
//   STRATA_LOG_SUBSYS=INIT,COLL,P2P,SHM,NET,PIPE,PROF,RULES,CONFIG (default all)
//   STRATA_LOG_RANKS=0,3                          (default all)
//   STRATA_LOG_FILE=/path/strata.%h.%r.log          (%h host, %p pid, %r rank; default stderr)
//
// Each line is formatted first and written with one fwrite, so lines from different
// threads and ranks never interleave mid-line. All functions are thread-safe.
#pragma once

#include <c10/util/StringUtil.h>

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

enum class LogLevel { kError = 0, kWarn, kInfo, kDebug, kTrace };

enum Subsys : uint32_t {
  kInit = 1,
  kColl = 2,
  kP2p = 4,
  kShm = 8,
  kNet = 16,
  kPipe = 32,
  kProf = 64,
  kRules = 128,
  kConfig = 256,
  kAllSubsys = 0xffffffffu,
};

bool logEnabled(LogLevel level, uint32_t subsys);
void logLine(LogLevel level, uint32_t subsys, const char* file, int line, const std::string& msg);

// Called by the runtime once the rank is known: re-reads STRATA_LOG_RANKS / _FILE.
void configureLogging(int rank, const std::string& host);

// Job-config defaults; each applies only when its STRATA_LOG_* variable is unset.
struct LogDefaults {
  std::string level;                // "" keeps the current level
  std::string subsys;               // "COLL,NET"; "" keeps
  std::vector<int> ranks;           // empty keeps
  std::string file;                 // pattern with %h %p %r; "" keeps
};
void applyLogDefaults(const LogDefaults& defaults, int rank, const std::string& host);

// Parses "WARN" etc.; returns false on an unknown name (pure, tested).
bool parseLogLevel(const std::string& text, LogLevel* out);
// Parses "COLL,NET"; unknown names are reported in *unknown (pure, tested).
uint32_t parseSubsysMask(const std::string& text, std::string* unknown);

}  // namespace strata

#define STRATA_LOG(level, subsys, ...)                                              \
  do {                                                                              \
    if (::strata::logEnabled(::strata::LogLevel::level, ::strata::subsys))          \
      ::strata::logLine(::strata::LogLevel::level, ::strata::subsys, __FILE__, __LINE__, \
                        ::c10::str(__VA_ARGS__));                                   \
  } while (0)
