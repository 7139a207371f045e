// loadJobConfig: where the config comes from (argv, then STRATA_CONFIG, then defaults) and
// reading the file. The only part of the config module that touches the process or the OS.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "config/config.h"
#include "core/errors.h"
#include "core/logging.h"

namespace strata::config {
namespace {

// A job config is a few kilobytes; anything this large is the wrong file (a checkpoint, a
// dataset) and reading it whole would only delay the error.
constexpr size_t kMaxConfigBytes = 16u << 20;

constexpr const char* kFlag = "--config";
constexpr const char* kEnvVar = "STRATA_CONFIG";

struct ConfigLocation {
  std::string path;    // empty: none given
  std::string origin;  // "--config" or "STRATA_CONFIG", for messages
};

ConfigLocation findConfig(int argc, char** argv) {
  ConfigLocation found;
  const std::string prefix = std::string(kFlag) + "=";
  for (int i = 1; i < argc && argv[i] != nullptr; ++i) {
    const std::string arg = argv[i];
    if (arg == kFlag) {
      if (i + 1 >= argc || argv[i + 1] == nullptr)
        STRATA_THROW(ConfigError,
                     "--config needs a file name: --config job.json or --config=job.json");
      found = {argv[++i], "--config"};
    } else if (arg.compare(0, prefix.size(), prefix) == 0) {
      found = {arg.substr(prefix.size()), "--config"};
    }
    if (found.origin == "--config" && found.path.empty())
      STRATA_THROW(ConfigError, "--config was given an empty file name");
  }
  if (!found.path.empty()) return found;
  // An empty STRATA_CONFIG counts as unset, so `STRATA_CONFIG= ./train` runs on defaults.
  const char* env = std::getenv(kEnvVar);
  if (env != nullptr && env[0] != '\0') found = {env, kEnvVar};
  return found;
}

std::string readConfigFile(const ConfigLocation& where) {
  const auto fail = [&](const std::string& why) {
    STRATA_THROW(ConfigError, "cannot read config file \"", where.path, "\" (from ", where.origin,
                 "): ", why);
  };
  const int fd = ::open(where.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(std::strerror(errno));
  std::string text;
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      fail(std::strerror(err));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > kMaxConfigBytes) {
      ::close(fd);
      fail("larger than " + std::to_string(kMaxConfigBytes >> 20) +
           " MiB; is this the job config?");
    }
  }
  ::close(fd);
  return text;
}

}  // namespace

JobConfig loadJobConfig(int argc, char** argv) {
  const ConfigLocation where = findConfig(argc, argv);
  if (where.path.empty()) {
    STRATA_LOG(kInfo, kConfig, "no --config or ", kEnvVar, ": using the default job config");
    return defaultJobConfig();
  }
  JobConfig config = parseJobConfig(readConfigFile(where), where.path);
  STRATA_LOG(kInfo, kConfig, "job config from ", where.path, " (", where.origin, ")");
  return config;
}

}  // namespace strata::config
