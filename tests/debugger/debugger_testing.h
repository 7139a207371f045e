// Helpers shared by the debugger tests: a temporary trial directory, config parsing, and the
// independent Python reader of our files.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/hex.h"
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

inline std::string hexOf(const std::string& bytes) { return toHex(bytes); }

inline std::string fromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// Runs a shell command: its exit status (-1 when it did not exit normally), its stdout
// appended to *out.
inline int runCommand(const std::string& command, std::string* out) {
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out->append(buf, n);
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The independent reader of our event files: /usr/bin/python3 with Debian's python3-protobuf,
// decoding with a .proto compiled by protoc at test time (tests/debugger/decode_events.py).
inline const std::filesystem::path kDecodeEventsScript =
    std::filesystem::path(STRATA_SOURCE_DIR) / "tests" / "debugger" / "decode_events.py";
inline const std::filesystem::path kEventProtos =
    std::filesystem::path(STRATA_SOURCE_DIR) / "src" / "debugger" / "proto";

// Why that reader cannot run on this machine, "" when it can (a test skips with the reason).
inline std::string pythonDecoderMissing() {
  std::string ignored;
  if (!std::filesystem::exists("/usr/bin/python3")) return "/usr/bin/python3 is not installed";
  if (runCommand("/usr/bin/python3 -c 'import google.protobuf' 2>/dev/null", &ignored) != 0)
    return "python3-protobuf is not installed (apt-get install python3-protobuf)";
  if (runCommand("command -v protoc >/dev/null 2>&1", &ignored) != 0)
    return "protoc is not installed (apt-get install protobuf-compiler)";
  return "";
}

// Decodes the trial in `trialDir` (scratch files in `workDir`): the script's exit status (2:
// its environment is incomplete) and its JSON in *out.
inline int decodeWithPython(const std::string& trialDir, const std::string& workDir, std::string* out) {
  return runCommand("/usr/bin/python3 " + kDecodeEventsScript.string() + " " + trialDir + " " +
                        kEventProtos.string() + " " + workDir,
                    out);
}

}  // namespace strata::debugger::testing
