#include "runtime/launch.h"

#include <algorithm>
#include <cstdlib>

#include "core/errors.h"

namespace strata::runtime {
namespace {

const std::string* find(const EnvMap& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

int parseNonNegative(const EnvMap& /*env*/, const char* name, const std::string& value) {
  char* end = nullptr;
  const long v = std::strtol(value.c_str(), &end, 10);
  STRATA_CHECK_WITH(ConfigError, end && *end == '\0' && v >= 0 && v < (1 << 30),
                    "environment variable ", name, "=\"", value, "\" is not a non-negative integer");
  return static_cast<int>(v);
}

int intVar(const EnvMap& env, const char* name, int fallback) {
  const std::string* v = find(env, name);
  return v ? parseNonNegative(env, name, *v) : fallback;
}

}  // namespace

const char* launchKindName(LaunchKind kind) {
  switch (kind) {
    case LaunchKind::kSingle: return "single";
    case LaunchKind::kMpi: return "mpi";
    case LaunchKind::kEnv: return "env";
  }
  return "?";
}

LaunchInfo detectLaunch(const EnvMap& env) {
  LaunchInfo info;
  if (find(env, "OMPI_COMM_WORLD_SIZE") || find(env, "PMIX_RANK") || find(env, "PMI_RANK")) {
    info.kind = LaunchKind::kMpi;
    info.rank = intVar(env, "OMPI_COMM_WORLD_RANK", intVar(env, "PMIX_RANK", intVar(env, "PMI_RANK", 0)));
    info.size = intVar(env, "OMPI_COMM_WORLD_SIZE", intVar(env, "PMI_SIZE", 1));
    info.localRank = intVar(env, "OMPI_COMM_WORLD_LOCAL_RANK", -1);
    return info;
  }
  const std::string* rank = find(env, "RANK");
  const std::string* worldSize = find(env, "WORLD_SIZE");
  if (!rank && !worldSize) return info;
  STRATA_CHECK_WITH(ConfigError, rank && worldSize,
                    "launching from the environment needs both RANK and WORLD_SIZE, but got RANK=\"",
                    rank ? *rank : "", "\" WORLD_SIZE=\"", worldSize ? *worldSize : "", "\"");
  info.kind = LaunchKind::kEnv;
  info.rank = parseNonNegative(env, "RANK", *rank);
  info.size = parseNonNegative(env, "WORLD_SIZE", *worldSize);
  STRATA_CHECK_WITH(ConfigError, info.size >= 1 && info.rank < info.size, "RANK=", info.rank,
                    " must be below WORLD_SIZE=", info.size);
  info.localRank = intVar(env, "LOCAL_RANK", -1);
  const std::string* addr = find(env, "MASTER_ADDR");
  const std::string* port = find(env, "MASTER_PORT");
  if (info.size > 1) {
    STRATA_CHECK_WITH(ConfigError, addr && port, "WORLD_SIZE=", info.size,
                      " needs MASTER_ADDR and MASTER_PORT for the rendezvous store, but got MASTER_ADDR=\"",
                      addr ? *addr : "", "\" MASTER_PORT=\"", port ? *port : "", "\"");
  }
  info.masterAddr = addr ? *addr : "127.0.0.1";
  info.masterPort = port ? parseNonNegative(env, "MASTER_PORT", *port) : 0;
  STRATA_CHECK_WITH(ConfigError, info.masterPort < 65536, "MASTER_PORT=", info.masterPort,
                    " is not a TCP port (0-65535)");
  return info;
}

EnvMap launchEnvironment() {
  EnvMap env;
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                           "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                           "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS"}) {
    if (const char* v = std::getenv(name)) env[name] = v;
  }
  return env;
}

std::vector<std::string> pretendHosts(const std::vector<std::string>& realHosts, int hostsPerRealHost) {
  if (hostsPerRealHost <= 1) return realHosts;
  std::vector<std::string> out(realHosts.size());
  std::map<std::string, std::vector<size_t>> ranksOf;
  for (size_t r = 0; r < realHosts.size(); ++r) ranksOf[realHosts[r]].push_back(r);
  for (const auto& [host, ranks] : ranksOf) {
    const size_t k = static_cast<size_t>(hostsPerRealHost);
    for (size_t i = 0; i < ranks.size(); ++i) {
      out[ranks[i]] = host + "#" + std::to_string(i * k / ranks.size());
    }
  }
  return out;
}

int intraOpThreads(const EnvMap& env, int hostCores, int ownCores, int localRanks) {
  if (const std::string* v = find(env, "OMP_NUM_THREADS")) {
    const std::string first = v->substr(0, v->find(','));
    STRATA_CHECK_WITH(ConfigError, !first.empty(), "environment variable OMP_NUM_THREADS=\"", *v,
                      "\" is not a positive integer");
    const int threads = parseNonNegative(env, "OMP_NUM_THREADS", first);
    STRATA_CHECK_WITH(ConfigError, threads > 0, "environment variable OMP_NUM_THREADS=\"", *v,
                      "\" is not a positive integer");
    return threads;
  }
  const int shareOfHost = std::max(1, hostCores) / std::max(1, localRanks);
  return std::max(1, std::min(shareOfHost, std::max(1, ownCores)));
}

}  // namespace strata::runtime
