// Helpers shared by the debugger tests: a temporary trial directory and config parsing.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "config/config.h"
#include "debugger/collections.h"
#include "debugger/hook.h"

namespace strata::debugger::testing {

// A fresh directory under $TMPDIR, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/strata_dbg_XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    path_ = ::mkdtemp(buf.data()) ? std::string(buf.data()) : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The "debugger" section of a job config, parsed as a user would write it.
inline config::DebuggerConfig debuggerConfig(const std::string& sectionJson) {
  return config::parseJobConfig("{\"debugger\": " + sectionJson + "}", "test").debugger;
}

// The steps in [0, upTo] of `mode` at which `c` is due.
inline std::vector<int64_t> dueSteps(const Collection& c, Mode mode, int64_t upTo) {
  std::vector<int64_t> out;
  for (int64_t s = 0; s <= upTo; ++s)
    if (isCollectionDue(c, mode, s)) out.push_back(s);
  return out;
}

inline HookOptions hookOptions(const std::string& dir, int rank = 0, int worldSize = 1) {
  HookOptions o;
  o.outputDir = dir;
  o.rank = rank;
  o.worldSize = worldSize;
  return o;
}

inline std::string hexOf(const std::string& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

inline std::string fromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

}  // namespace strata::debugger::testing
