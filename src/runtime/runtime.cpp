#include "strata/runtime.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "bootstrap/mpi_bootstrap.h"
#include "bootstrap/store.h"
#include "collectives/communicator.h"
#include "config/config.h"
#include "core/env.h"
#include "core/errors.h"
#include "core/logging.h"
#include "core/malloc_policy.h"
#include "core/rank_tag.h"
#include "core/auth.h"
#include "core/build_config.h"
#include "core/hex.h"
#include "core/key_exchange.h"
#include "profiler/session.h"
#include "rules/online.h"
#include "runtime/exit_status.h"
#include "runtime/job_secret.h"
#include "runtime/flight.h"
#include "runtime/launch.h"
#include "runtime/output_dir_lock.h"
#include "runtime/online_rules.h"
#include "runtime/runtime_internal.h"
#include "runtime/secret_exchange.h"
#include "runtime/signals.h"
#include "runtime/stop.h"

namespace strata {
namespace {

// Chunked shm collectives stage at most this much per rank per buffer.
constexpr int64_t kMaxSlotBytes = int64_t{1} << 30;

struct RuntimeState {
  config::JobConfig config;
  // Rank 0: this job's claim on config.outputDir (runtime/output_dir_lock.h). Declared
  // early so it is released last, after every writer of the directory has closed.
  std::unique_ptr<FileLock> outputDirLock;
  runtime::LaunchInfo launch;
  std::shared_ptr<bootstrap::Store> store;
  std::vector<transport::PeerInfo> peers;
  runtime::JobSecret secret;  // the effective secret (also in commOptions.jobSecret)
  MallocDecision mallocDecision;  // memory.malloc as carried out (core/malloc_policy.h)
  collectives::CommOptions commOptions;
  std::unique_ptr<Group> world;
  std::string host;
  int localRank = 0;
  int localSize = 1;
  int node = 0;
  int numNodes = 1;
  std::map<std::string, int> groupsCreated;  // rank list -> how many groups of it so far
  std::vector<std::function<void()>> finalizers;
  std::unique_ptr<profiler::Session> profiler;
  std::unique_ptr<rules::RuleRunner> rules;  // rank 0, when the config has rules
  std::unique_ptr<rules::OnlineEngine> inProcessRules;  // tensor rules on this rank's data
  runtime::FlightSettings flight;  // the recorder itself is commOptions.flight
};

std::mutex stateMutex;
std::unique_ptr<RuntimeState> state;

RuntimeState& current() {
  STRATA_CHECK(state != nullptr, "strata::init() has not been called (or finalize() already was)");
  return *state;
}

std::string realHostname() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) return "localhost";
  return host;
}

// The first non-loopback IPv4 address (STRATA_IFADDR overrides): what other hosts dial.
std::string externalAddress() {
  const std::string forced = env::getString("STRATA_IFADDR", "");
  if (!forced.empty()) return forced;
  struct ifaddrs* list = nullptr;
  std::string found = "127.0.0.1";
  if (getifaddrs(&list) != 0) return found;
  for (auto* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof(text));
    if (std::string(text).rfind("127.", 0) != 0) {
      found = text;
      break;
    }
  }
  freeifaddrs(list);
  return found;
}

bool allEqual(const std::vector<std::string>& v) {
  for (const auto& s : v)
    if (s != v.front()) return false;
  return true;
}

// Where rank 0's store listens: STRATA_STORE_BIND_ADDR, else the address ranks dial.
std::string storeBindHost(const std::string& dialed) {
  const std::string forced = env::getString("STRATA_STORE_BIND_ADDR", "");
  return forced.empty() ? dialed : forced;
}

std::shared_ptr<bootstrap::TcpStore> connectStore(const RuntimeState& s, const std::string& host, uint16_t port,
                                                  bool isServer) {
  bootstrap::TcpStoreOptions o;
  o.host = host;
  o.port = port;
  o.isServer = isServer;
  o.timeout = s.commOptions.timeout;
  o.secret = s.secret.secret;
  o.rank = s.launch.rank;
  if (isServer) o.bindHost = storeBindHost(host);
  return bootstrap::TcpStore::create(o);
}

// mpirun: ranks without a configured secret get the one rank 0 draws, sealed for each over
// MPI (runtime/secret_exchange.h: MPI's data path between hosts is plain TCP, so the secret
// never crosses it in clear); some ranks with one and some without is a ConfigError, and so
// is encryption across several hosts without one (runtime/job_secret.h).
void shareSecretOverMpi(RuntimeState& s, bool severalHosts) {
  const bool mine = s.secret.origin != runtime::SecretOrigin::kNone;
  const auth::EphemeralKey key;
  const std::vector<std::string> gathered =
      bootstrap::mpiAllGatherStrings(runtime::encodeOffer({mine, s.commOptions.encryptInterHost, key.publicKey()}));
  std::vector<runtime::SecretOffer> offers;
  std::vector<bool> has;
  bool encrypt = false;
  for (size_t r = 0; r < gathered.size(); ++r) {
    offers.push_back(runtime::decodeOffer(gathered[r], static_cast<int>(r)));
    has.push_back(offers.back().hasSecret);
    encrypt |= offers.back().encryptInterHost;
  }
  const std::string mismatch = runtime::secretPresenceMismatch(has);
  STRATA_CHECK_WITH(ConfigError, mismatch.empty(), mismatch);
  if (mine) return;
  const runtime::NoSecretSituation situation{runtime::LaunchKind::kMpi, severalHosts, encrypt,
                                             s.config.security.allowUnauthenticated};
  STRATA_CHECK_WITH(ConfigError, runtime::decideWithoutSecret(situation) == runtime::NoSecretAction::kExchange,
                    runtime::noSecretRefusal(situation, ""));
  const int rank = s.launch.rank;
  const std::string secret = rank == 0 ? auth::generateSecret() : std::string();
  const std::string sealed = rank == 0 ? runtime::sealForRanks(key, offers, secret) : std::string();
  const std::string fromRank0 = bootstrap::mpiAllGatherStrings(sealed)[0];
  s.secret = {rank == 0 ? secret : runtime::openFromRank0(key, offers[0].publicKey, rank, fromRank0),
              runtime::SecretOrigin::kGenerated};
  // Public: says which exchange a rank took part in (the multi-host capture test finds it on the wire).
  STRATA_LOG(kInfo, kInit, "job secret: drawn by rank 0, sealed for each rank by X25519 (rank 0's public key ",
             toHex(offers[0].publicKey), ")");
}

// Env launch without a configured secret: refused unless allowed (then warned).
void checkUnauthenticatedEnvLaunch(const RuntimeState& s) {
  if (s.secret.origin != runtime::SecretOrigin::kNone) return;
  const runtime::NoSecretSituation situation{s.launch.kind, false, s.commOptions.encryptInterHost,
                                             s.config.security.allowUnauthenticated};
  STRATA_CHECK_WITH(ConfigError, runtime::decideWithoutSecret(situation) != runtime::NoSecretAction::kRefuse,
                    runtime::noSecretRefusal(situation, s.launch.masterAddr));
  if (s.launch.rank == 0) {
    STRATA_LOG(kWarn, kInit, "no job secret: the rendezvous store at ", s.launch.masterAddr, ":", s.launch.masterPort,
               " and the TCP connections are unauthenticated (any process that can reach them could join); set "
               "STRATA_JOB_SECRET or security.job_secret_file (docs/security.md)");
  }
}

// "; the store refused: ..." when the store turned clients away (a wrong secret), else "".
std::string storeRefusals(bootstrap::Store& store) {
  try {
    if (!store.check(bootstrap::kStoreRefusalsKey)) return "";
    std::string text = bootstrap::getString(store, bootstrap::kStoreRefusalsKey, std::chrono::milliseconds(1000));
    while (!text.empty() && text.back() == '\n') text.pop_back();
    for (char& c : text)
      if (c == '\n') c = ';';
    return "; the store refused: " + text;
  } catch (const std::exception&) {
    return "";
  }
}

// Rendezvous: a store every rank can reach, and every rank's real hostname.
std::vector<std::string> rendezvous(RuntimeState& s, const std::string& myHost) {
  const auto timeout = s.commOptions.timeout;
  const runtime::LaunchInfo& l = s.launch;
  if (l.kind == runtime::LaunchKind::kSingle) {
    s.store = bootstrap::makeHashStore();
    return {myHost};
  }
  if (l.kind == runtime::LaunchKind::kMpi) {
    const auto [rank, size] = bootstrap::mpiInit();
    STRATA_CHECK_WITH(ConfigError, rank == l.rank && size == l.size, "MPI reports rank ", rank, "/", size,
                      " but the launcher's environment said ", l.rank, "/", l.size);
    const std::vector<std::string> hosts = bootstrap::mpiAllGatherStrings(myHost);
    shareSecretOverMpi(s, !allEqual(hosts));
    // One host: everything over loopback; several: the address other hosts can dial.
    const std::string addr = allEqual(hosts) ? "127.0.0.1" : externalAddress();
    std::shared_ptr<bootstrap::TcpStore> store;
    std::string endpoint;
    if (rank == 0) {
      store = connectStore(s, addr, 0, /*isServer=*/true);
      endpoint = addr + ":" + std::to_string(store->port());
    }
    const std::string shared = bootstrap::mpiAllGatherStrings(endpoint)[0];
    if (rank != 0) {
      const size_t colon = shared.rfind(':');
      store = connectStore(s, shared.substr(0, colon),
                           static_cast<uint16_t>(std::stoi(shared.substr(colon + 1))), /*isServer=*/false);
    }
    s.store = store;
    return hosts;
  }
  checkUnauthenticatedEnvLaunch(s);
  s.store = connectStore(s, l.masterAddr, static_cast<uint16_t>(l.masterPort), l.rank == 0);
  bootstrap::setString(*s.store, "host/" + std::to_string(l.rank), myHost);
  std::vector<std::string> hosts;
  for (int r = 0; r < l.size; ++r) {
    try {
      hosts.push_back(bootstrap::getString(*s.store, "host/" + std::to_string(r), timeout));
    } catch (const TimeoutError& e) {
      STRATA_THROW(TimeoutError, "rank ", r, " did not join the job within ", timeout.count(), " ms",
                   storeRefusals(*s.store), " (", e.what(), ")");
    }
  }
  return hosts;
}

void applyEnvironmentOverrides(RuntimeState& s, const InitOptions& options) {
  const config::CollectivesConfig& c = s.config.collectives;
  collectives::CommOptions& o = s.commOptions;
  o.timeout = std::chrono::milliseconds(env::getInt("STRATA_TIMEOUT_MS", c.timeout.count(), 1, int64_t{1} << 40));
  if (options.timeout.count() > 0) o.timeout = options.timeout;
  o.transport = env::getString("STRATA_TRANSPORT", c.transport, {"auto", "shm", "tcp"});
  if (!options.transport.empty()) o.transport = options.transport;
  // Point-to-point (pipeline stage links): "tcp" forces TCP between ranks of one host too.
  o.p2pTransport = env::getString("STRATA_P2P_TRANSPORT", "auto", {"auto", "tcp"});
  o.p2pRingBytes = static_cast<size_t>(env::getInt("STRATA_P2P_RING_BYTES", 0, 0, int64_t{1} << 32));
  o.p2pYieldUs = env::getInt("STRATA_P2P_YIELD_US", -1, -1, int64_t{10} * 1000 * 1000);
  o.allreduceAlgo = env::getString("STRATA_ALLREDUCE_ALGO", c.allreduceAlgo, collectives::algoNames());
  o.shmSlotBytes = static_cast<size_t>(env::getInt("STRATA_SHM_SLOT_BYTES", 1 << 20, 4096, kMaxSlotBytes));
  o.shmSpinsBeforeYield = static_cast<int>(env::getInt("STRATA_SHM_SPINS", -1, -1, 1 << 30));
  // 0 (the default): the communicator picks collectives::defaultChunkBytes for its host.
  o.chunkBytes = static_cast<size_t>(env::getInt("STRATA_CHUNK_BYTES", 0, 0, kMaxSlotBytes));
  // 0: collectives::defaultDirectBlockBytes (the zero-copy path stages nothing, so no slot caps it).
  o.directBlockBytes = static_cast<size_t>(env::getInt("STRATA_DIRECT_BLOCK_BYTES", 0, 0, int64_t{1} << 40));
  // STRATA_TLS overrides security.encrypt_inter_node_traffic either way.
  o.encryptInterHost =
      env::getInt("STRATA_TLS", s.config.security.encryptInterNodeTraffic ? 1 : 0, 0, 1) == 1;
  s.secret = runtime::loadJobSecret(s.config.security.jobSecretFile);
  // Before the world's buffers and the training loop allocate (core/malloc_policy.h).
  s.config.memory.malloc = env::getString("STRATA_MALLOC", s.config.memory.malloc, {"retain", "system"});
  s.mallocDecision = decideMallocPolicy(parseMallocPolicy(s.config.memory.malloc, "memory.malloc"),
                                       userTunedMalloc([](const char* name) -> const char* { return std::getenv(name); }));
  if (s.mallocDecision.apply) applyMallocPolicy(MallocPolicy::kRetain);
  s.flight = runtime::flightSettings(s.config);
  o.flight = runtime::createFlightRecorder(s.flight);
}

void startFlightDumps(const RuntimeState& s) {
  collectives::flight::DumpHeader identity;
  identity.rank = s.launch.rank;
  identity.worldSize = s.launch.size;
  identity.host = s.host;
  identity.pid = getpid();
  runtime::startFlightDumps(s.commOptions.flight, s.flight, identity);
}

void buildWorld(RuntimeState& s) {
  const std::string myHost = realHostname();
  const std::vector<std::string> realHosts = rendezvous(s, myHost);
  const int hostsPerRealHost = static_cast<int>(env::getInt("STRATA_HOSTS", 1, 1, 1 << 16));
  const std::vector<std::string> hosts = runtime::pretendHosts(realHosts, hostsPerRealHost);
  std::map<std::string, int> hostIndex;
  for (const auto& h : hosts) hostIndex.emplace(h, static_cast<int>(hostIndex.size()));
  const int rank = s.launch.rank;
  bootstrap::setString(*s.store, "pid/" + std::to_string(rank), std::to_string(getpid()));
  for (int r = 0; r < s.launch.size; ++r) {
    transport::PeerInfo p;
    p.rank = r;
    p.host = hosts[r];
    p.hostIndex = hostIndex.at(hosts[r]);
    p.pid = static_cast<pid_t>(std::stol(bootstrap::getString(*s.store, "pid/" + std::to_string(r), s.commOptions.timeout)));
    s.peers.push_back(p);
  }
  s.host = hosts[rank];
  s.node = hostIndex.at(hosts[rank]);
  s.numNodes = static_cast<int>(hostIndex.size());
  s.localRank = 0;
  s.localSize = 0;
  for (int r = 0; r < s.launch.size; ++r) {
    if (hosts[r] != hosts[rank]) continue;
    if (r < rank) ++s.localRank;
    ++s.localSize;
  }
  s.commOptions.advertiseHost = allEqual(realHosts) ? "127.0.0.1" : externalAddress();
  // Listen only where peers dial (unless STRATA_TCP_IFADDR advertises another address).
  if (env::getString("STRATA_TCP_IFADDR", "").empty()) s.commOptions.bindHost = s.commOptions.advertiseHost;
  s.commOptions.jobSecret = s.secret.secret;
  auto worldStore = bootstrap::makePrefixStore("world", s.store);
  s.world = std::make_unique<Group>(collectives::Communicator::create(worldStore, rank, s.peers, s.commOptions));
}

void logEffectiveSettings(const RuntimeState& s) {
  STRATA_LOG(kInfo, kInit, "strata ", STRATA_VERSION_STRING, " launch=", runtime::launchKindName(s.launch.kind),
             " host=", s.host, " local_rank=", s.localRank, "/", s.localSize, " node=", s.node, "/", s.numNodes);
  STRATA_LOG(kInfo, kInit, "security: job secret from ", runtime::secretOriginName(s.secret.origin),
             ", encrypt_inter_node_traffic=", s.commOptions.encryptInterHost ? "true" : "false");
  const std::string weak = runtime::weakSecretWarning(s.secret.secret, s.secret.origin);
  if (!weak.empty() && s.launch.rank == 0) STRATA_LOG(kWarn, kInit, weak);
  STRATA_LOG(kInfo, kInit, "collectives: timeout_ms=", s.commOptions.timeout.count(),
             " transport=", s.commOptions.transport, " allreduce_algo=", s.commOptions.allreduceAlgo,
             " shm_slot_bytes=", s.commOptions.shmSlotBytes, " chunk_bytes=", s.commOptions.chunkBytes);
  STRATA_LOG(kInfo, kInit, "memory: malloc=", s.config.memory.malloc, " (", s.mallocDecision.reason, ")");
  for (const auto& [name, value] : env::strataVariables())
    STRATA_LOG(kInfo, kInit, "env ", name, "=", name == "STRATA_JOB_SECRET" ? "<set>" : value);
  STRATA_LOG(kInfo, kConfig, "job config (", s.config.source, "): ", config::toJson(s.config).dump());
}

// The per-rank profiler: system metrics on one rank per host, the timeline on every rank.
void startProfiler(RuntimeState& s) {
  profiler::SessionInfo info;
  info.outputDir = s.config.outputDir;
  info.rank = s.launch.rank;
  info.worldSize = s.launch.size;
  info.hostIndex = s.node;
  info.hostname = s.host;
  info.runSystemSampler = s.localRank == 0;
  s.profiler = profiler::Session::start(s.config.profiler, std::move(info));
}

// How long rank 0 waits at finalize for the others before writing end markers anyway.
constexpr std::chrono::milliseconds kFinalizeWait{30000};

bool arriveAt(RuntimeState& s, const std::string& key) {
  try {
    // After a failure some rank (perhaps the store's host, rank 0) may be gone: neither
    // wait for it nor talk to a store that may have died with it.
    if (s.world->communicator().failed() || s.world->communicator().lostPeer()) return false;
    s.store->add("finalize/" + key, 1);
    if (s.launch.rank != 0) return true;
    const auto deadline = std::chrono::steady_clock::now() + std::min(kFinalizeWait, s.commOptions.timeout);
    while (s.store->add("finalize/" + key, 0) < s.launch.size) {
      if (std::chrono::steady_clock::now() > deadline) {
        STRATA_LOG(kWarn, kInit, "finalize: not every rank reached ", key, " in time; going on");
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  } catch (const std::exception& e) {
    STRATA_LOG(kWarn, kInit, "finalize: rendezvous ", key, " failed: ", e.what());
    return false;
  }
}

// Every rank that is the first worker of its data: the tensor rules in process, on the
// debugger's data as each step completes (runtime/online_rules.h). Rank 0: the config's rules
// on a thread over the files as they are written (the record, rule-output/), and the stop
// file of an out-of-process `strata rules --watch`; all read by strata::should_stop().
// A rule that cannot be built is logged, not fatal: the other ranks are already training.
void startRules(RuntimeState& s) {
  s.inProcessRules = runtime::startInProcessRules(s.config, s.launch.rank, s.launch.size);
  if (s.launch.rank != 0) return;
  runtime::watchStopFile(s.config.outputDir);
  if (s.config.rules.empty()) return;
  try {
    rules::OnlineRulesOptions o;
    o.runDir = s.config.outputDir;
    o.interval = std::chrono::milliseconds(env::getInt("STRATA_RULES_INTERVAL_MS", o.interval.count(), 50, 3600000));
    s.rules = rules::startOnlineRules(rules::specsFromConfig(s.config.rules), o);
  } catch (const std::exception& e) {
    STRATA_LOG(kError, kRules, "online rules not started: ", e.what());
  }
}

// After every writer closed its files and the end markers exist: the last poll sees the
// whole run and rule-output/ is final.
void stopRules(RuntimeState& s) {
  runtime::stopInProcessRules(s.inProcessRules);
  rules::stopOnlineRules(s.rules);
  // This run's stop requests are consumed (a signal stays): a later init() starts clean.
  runtime::endStopRun();
}

void stopProfiler(RuntimeState& s) {
  if (!s.profiler) return;
  s.profiler->stop();
  // Every rank's files are closed before rank 0 writes the end marker.
  arriveAt(s, "profiler");
  if (s.launch.rank == 0) profiler::markTrainingJobEnd(s.config.outputDir);
  s.profiler.reset();
}

void initWith(config::JobConfig cfg, const InitOptions& options) {
  std::lock_guard<std::mutex> lock(stateMutex);
  STRATA_CHECK(state == nullptr, "strata::init() called twice");
  auto s = std::make_unique<RuntimeState>();
  s->launch = runtime::detectLaunch(runtime::launchEnvironment());
  setRankTag(s->launch.rank, s->launch.size);
  s->config = std::move(cfg);
  config::checkWorldSize(s->config, s->launch.size);
  applyEnvironmentOverrides(*s, options);
  buildWorld(*s);
  configureLogging(s->launch.rank, s->host);
  LogDefaults logDefaults;
  const config::LoggingConfig& lc = s->config.logging;
  logDefaults.level = lc.level.value_or("");
  for (const auto& name : lc.subsys) logDefaults.subsys += (logDefaults.subsys.empty() ? "" : ",") + name;
  logDefaults.ranks = lc.ranks;
  logDefaults.file = lc.file.value_or("");
  applyLogDefaults(logDefaults, s->launch.rank, s->host);
  logEffectiveSettings(*s);
  s->outputDirLock = runtime::lockOutputDir(*s->store, s->launch.rank, s->launch.size, s->commOptions.timeout,
                                            s->config.outputDir, s->host);
  startProfiler(*s);
  startRules(*s);
  // SIGTERM/SIGINT finish the step, checkpoint and exit (runtime/signals.h).
  runtime::installStopSignalHandlers();
  startFlightDumps(*s);
  state = std::move(s);
}

// Rank tag from the launcher's variables, so that config errors already name the rank; and
// an uncaught ConfigError from here on exits 78, not a crash (runtime/exit_status.h).
void tagFromEnvironment() {
  runtime::installConfigErrorExit();
  try {
    const runtime::LaunchInfo l = runtime::detectLaunch(runtime::launchEnvironment());
    setRankTag(l.rank, l.size);
  } catch (const std::exception&) {
    // detectLaunch reports the same problem again, with context, in initWith.
  }
}

}  // namespace

void init(int argc, char** argv) {
  tagFromEnvironment();
  initWith(config::loadJobConfig(argc, argv), InitOptions{});
}

void init(const InitOptions& options) {
  tagFromEnvironment();
  if (!options.configJson.empty()) {
    initWith(config::parseJobConfig(options.configJson, "InitOptions::configJson"), options);
  } else if (!options.configPath.empty()) {
    std::string flag = "--config=" + options.configPath;
    char* argv[] = {const_cast<char*>("strata"), flag.data()};
    initWith(config::loadJobConfig(2, argv), options);
  } else {
    initWith(config::loadJobConfig(0, nullptr), options);
  }
}

void finalize() {
  std::vector<std::function<void()>> finalizers;
  {
    std::lock_guard<std::mutex> lock(stateMutex);
    if (!state) return;
    finalizers.swap(state->finalizers);
  }
  for (auto it = finalizers.rbegin(); it != finalizers.rend(); ++it) {
    try {
      (*it)();
    } catch (const std::exception& e) {
      STRATA_LOG(kWarn, kInit, "finalize: ", e.what());
    }
  }
  // While the groups still exist: the finalize dump (when asked), then SIGUSR2 is restored.
  runtime::stopFlightDumps();
  std::lock_guard<std::mutex> lock(stateMutex);
  if (!state) return;
  stopProfiler(*state);
  stopRules(*state);
  runtime::uninstallStopSignalHandlers();
  const bool mpi = state->launch.kind == runtime::LaunchKind::kMpi;
  // MPI_Finalize is a job-wide fence: after a peer died it may wait for that rank forever
  // (mpirun --enable-recovery keeps the survivors running; Open MPI 4.1 then hangs in about
  // one run in five). The job has failed anyway, and mpirun reports a rank that exits without
  // MPI_Finalize as failed, so the survivors leave without it.
  const bool lostPeer = state->world && state->world->communicator().lostPeer();
  state.reset();
  if (mpi && lostPeer) {
    STRATA_LOG(kWarn, kInit, "finalize: a peer was lost; MPI_Finalize skipped (its fence would wait for it)");
  } else if (mpi) {
    bootstrap::mpiFinalize();
  }
}

bool isInitialized() {
  std::lock_guard<std::mutex> lock(stateMutex);
  return state != nullptr;
}

int rank() { return current().launch.rank; }
int size() { return current().launch.size; }
int local_rank() { return current().localRank; }
int local_size() { return current().localSize; }
int node() { return current().node; }
int num_nodes() { return current().numNodes; }
const std::string& hostname() { return current().host; }
Group& world() { return *current().world; }
std::string configJson() { return config::toJson(current().config).dump(2); }
std::string outputDir() { return current().config.outputDir; }

namespace runtime {
const config::JobConfig& jobConfig() { return current().config; }
void addFinalizer(std::function<void()> fn) { current().finalizers.push_back(std::move(fn)); }
bool arriveAtFinalize(const std::string& key) { return arriveAt(current(), key); }
std::shared_ptr<bootstrap::Store> rendezvousStore() { return current().store; }
std::chrono::milliseconds waitTimeout() { return current().commOptions.timeout; }
std::string jobSecretForCaptureTest() { return current().secret.secret; }
}  // namespace runtime

std::shared_ptr<Group> newGroup(const std::vector<int>& ranks) {
  RuntimeState& s = current();
  STRATA_CHECK(!ranks.empty(), "newGroup needs at least one rank");
  std::string key;
  int myIndex = -1;
  std::vector<transport::PeerInfo> peers;
  for (size_t i = 0; i < ranks.size(); ++i) {
    STRATA_CHECK(ranks[i] >= 0 && ranks[i] < s.launch.size && (i == 0 || ranks[i] > ranks[i - 1]),
                 "newGroup ranks must be ascending, distinct world ranks below ", s.launch.size, "; got ", ranks[i],
                 " at position ", i);
    key += (i ? "," : "") + std::to_string(ranks[i]);
    if (ranks[i] == s.launch.rank) myIndex = static_cast<int>(i);
    transport::PeerInfo p = s.peers[ranks[i]];
    p.rank = static_cast<int>(i);
    peers.push_back(p);
  }
  STRATA_CHECK(myIndex >= 0, "rank ", s.launch.rank, " called newGroup for ranks [", key, "] it is not part of");
  const int instance = s.groupsCreated[key]++;
  const std::string name = "group/" + key + "/" + std::to_string(instance);
  auto store = bootstrap::makePrefixStore(name, s.store);
  collectives::CommOptions options = s.commOptions;
  options.groupName = name;  // equal on every member: the flight recorder matches by it
  options.worldRanks = ranks;
  return std::make_shared<Group>(collectives::Communicator::create(store, myIndex, peers, options));
}

}  // namespace strata
