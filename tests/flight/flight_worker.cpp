// strata_flight_worker: one rank of a job that goes wrong on purpose, run under
// `mpiexec --enable-recovery -np 3` by CTest (tests/flight/CMakeLists.txt). Every rank runs
// five good allreduces, then the scenario breaks operation 6:
//
//   hang      rank 1 skips allreduce 6 (and dumps itself with SIGUSR2); the others time out
//   mismatch  rank 1 calls allreduce 6 with twice the count
//   kill      rank 1 SIGKILLs itself before allreduce 6; the others see it die
//   p2p       rank 0 sends two messages to rank 1, which waits for a third (times out)
//   healthy   nothing breaks; every rank dumps at finalize
//
// Rank 0 then checks the evidence: the dumps that should exist do, with the right trigger,
// and `strata flight RUN_DIR --json` (and its text form) names the operation and the rank.
// It prints "flight-check: PASS" or "flight-check: FAIL <why>" lines (CTest matches them).
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "strata/errors.h"
#include "strata/group.h"
#include "strata/runtime.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kGoodOps = 5;        // allreduces before the scenario breaks operation 6
constexpr size_t kCount = 1024;    // floats per allreduce
constexpr int kShortTimeoutMs = 2000;   // hang, p2p: the time-out is the failure
constexpr int kLongTimeoutMs = 30000;   // otherwise: a failure must not be the time-out's doing
constexpr std::chrono::seconds kEvidenceWait{20};  // for the other ranks' dumps

struct Args {
  std::string scenario;
  std::string runDir;
  std::string strataCli;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--scenario") a.scenario = argv[i + 1];
    if (key == "--run-dir") a.runDir = argv[i + 1];
    if (key == "--strata") a.strataCli = argv[i + 1];
  }
  if (a.scenario.empty() || a.runDir.empty() || a.strataCli.empty()) {
    std::fprintf(stderr, "usage: strata_flight_worker --scenario S --run-dir DIR --strata CLI\n");
    std::exit(2);
  }
  return a;
}

int myRank = -1;

void say(const std::string& line) {
  std::printf("[rank %d] %s\n", myRank, line.c_str());
  std::fflush(stdout);
}

void allreduce(size_t count) {
  std::vector<float> x(count, 1.0f);
  strata::world().allreduce(x.data(), x.data(), count, strata::DType::kFloat32);
  if (x[0] != static_cast<float>(strata::size())) throw std::runtime_error("wrong allreduce result");
}

bool waitForFile(const std::string& path, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!fs::exists(path)) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::string dumpPath(const Args& a, int rank) { return a.runDir + "/flight/rank-" + std::to_string(rank) + ".json"; }

// Operation 6 and what follows, for this scenario. Throws what the failure throws.
void breakOperationSix(const Args& a) {
  const int rank = myRank;
  if (a.scenario == "hang" && rank == 1) {
    say("skipping allreduce 6; dumping with SIGUSR2");
    raise(SIGUSR2);
    if (!waitForFile(dumpPath(a, 1), kEvidenceWait)) say("no SIGUSR2 dump appeared");
    return;
  }
  if (a.scenario == "kill" && rank == 1) {
    say("SIGKILL before allreduce 6");
    raise(SIGKILL);
  }
  if (a.scenario == "p2p") {
    std::vector<float> msg(16, 2.0f);
    if (rank == 0)
      for (int i = 0; i < 2; ++i) strata::world().send(msg.data(), msg.size() * sizeof(float), 1, 7);
    if (rank == 1)
      for (int i = 0; i < 3; ++i) strata::world().recv(msg.data(), msg.size() * sizeof(float), 0, 7);
    return;
  }
  allreduce(a.scenario == "mismatch" && rank == 1 ? 2 * kCount : kCount);
}

std::string configJson(const Args& a) {
  const bool shortTimeout = a.scenario == "hang" || a.scenario == "p2p";
  nlohmann::json c;
  c["output_dir"] = a.runDir;
  c["collectives"]["timeout_ms"] = shortTimeout ? kShortTimeoutMs : kLongTimeoutMs;
  // p2p: the sender and the bystander see no failure, so every rank dumps at finalize.
  c["flight_recorder"]["dump_on_finalize"] = a.scenario == "healthy" || a.scenario == "p2p";
  c["profiler"]["disable_profiler"] = true;
  return c.dump();
}

// ---- rank 0's checks ----------------------------------------------------------------

struct Expect {
  std::vector<std::pair<int, std::string>> dumps;  // rank, trigger(s) of the dump or of its first failure
  std::vector<int> noDump;
  std::string kind;  // "" : healthy
  uint64_t seq = 0;
  std::vector<int> ranks;
  std::string op;  // a part of the verdict's op
};

Expect expectationFor(const std::string& scenario) {
  const std::string allreduce6 = "allreduce float32 sum count=1024 (4096 bytes)";
  if (scenario == "hang") return {{{0, "timeout"}, {1, "signal"}, {2, "timeout"}}, {}, "not_arrived", 6, {1}, allreduce6};
  if (scenario == "mismatch")
    return {{{0, "mismatch"}, {1, "mismatch"}, {2, "mismatch"}}, {}, "mismatch", 6, {1}, allreduce6};
  if (scenario == "kill") return {{{0, "network"}, {2, "network"}}, {1}, "no_dump", 6, {1}, allreduce6};
  // p2p: rank 1's third recv ends by its own time-out or, when rank 0 has already left
  // finalize's rendezvous (it waits as long as the time-out), by rank 0 closing the link.
  if (scenario == "p2p")
    return {{{0, "finalize"}, {1, "timeout|network"}, {2, "finalize"}}, {}, "p2p_not_arrived", 3, {0},
            "recv from rank 0 (64 bytes, tag 7)"};
  return {{{0, "finalize"}, {1, "finalize"}, {2, "finalize"}}, {}, "", 0, {}, ""};
}

// Runs `command`; returns its exit code and stdout.
int run(const std::string& command, std::string* out) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out->append(buf, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Whether `got` is one of the '|'-separated `alternatives`.
bool oneOf(const std::string& got, const std::string& alternatives) {
  std::stringstream in(alternatives);
  for (std::string one; std::getline(in, one, '|');)
    if (one == got) return true;
  return false;
}

std::vector<std::string> checkEvidence(const Args& a) {
  const Expect e = expectationFor(a.scenario);
  std::vector<std::string> problems;
  for (const auto& [rank, trigger] : e.dumps) {
    if (!waitForFile(dumpPath(a, rank), kEvidenceWait)) {
      problems.push_back("no dump from rank " + std::to_string(rank));
      continue;
    }
    std::ifstream in(dumpPath(a, rank));
    const nlohmann::json d = nlohmann::json::parse(in, nullptr, false);
    const std::string got = d.is_discarded() ? "unreadable"
                            : d.value("trigger", "") == "finalize" && !d["failures"].empty()
                                ? d["failures"][0].value("trigger", "?")
                                : d.value("trigger", "?");
    if (!oneOf(got, trigger))
      problems.push_back("rank " + std::to_string(rank) + "'s dump says " + got + ", expected " + trigger);
  }
  for (int rank : e.noDump)
    if (fs::exists(dumpPath(a, rank))) problems.push_back("rank " + std::to_string(rank) + " should have left no dump");
  std::string json, text;
  const int code = run(a.strataCli + " flight " + a.runDir + " --json", &json);
  const int textCode = run(a.strataCli + " flight " + a.runDir, &text);
  say("strata flight says:\n" + text);
  const nlohmann::json verdict = nlohmann::json::parse(json, nullptr, false);
  if (verdict.is_discarded()) return {"strata flight --json printed no JSON: " + json};
  const bool healthy = e.kind.empty();
  if (code != (healthy ? 0 : 1) || textCode != code)
    problems.push_back("strata flight exited " + std::to_string(code) + " (text form " + std::to_string(textCode) + ")");
  if (healthy) {
    if (verdict.value("ok", false) != true) problems.push_back("a healthy run was judged: " + verdict.dump());
    return problems;
  }
  const nlohmann::json& v = verdict["verdict"];
  if (!v.is_object()) return {"no verdict: " + verdict.dump()};
  if (v.value("kind", "") != e.kind) problems.push_back("verdict kind " + v.value("kind", "") + ", expected " + e.kind);
  if (v.value("group", "") != "world") problems.push_back("verdict group " + v.value("group", ""));
  if (v.value("seq", uint64_t{0}) != e.seq) problems.push_back("verdict seq " + v["seq"].dump());
  if (v["ranks"].get<std::vector<int>>() != e.ranks) problems.push_back("verdict ranks " + v["ranks"].dump());
  if (v.value("op", "").find(e.op) == std::string::npos) problems.push_back("verdict op " + v.value("op", ""));
  if (text.find("PROBLEM: ") == std::string::npos) problems.push_back("the text form has no PROBLEM line");
  return problems;
}

int finish(const Args& a) {
  if (myRank != 0) return 0;
  const std::vector<std::string> problems = checkEvidence(a);
  for (const std::string& p : problems) say("flight-check: FAIL " + p);
  if (problems.empty()) say("flight-check: PASS " + a.scenario);
  return problems.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive mpiexec
  const Args args = parse(argc, argv);
  // Rank 0 clears the last run's dumps; nobody dumps before the good allreduces, which
  // need rank 0.
  if (const char* r = std::getenv("OMPI_COMM_WORLD_RANK"); r && std::string(r) == "0") fs::remove_all(args.runDir);
  strata::InitOptions options;
  options.configJson = configJson(args);
  strata::init(options);
  myRank = strata::rank();
  try {
    for (int i = 0; i < kGoodOps; ++i) allreduce(kCount);
    breakOperationSix(args);
    if (args.scenario != "healthy" && !(args.scenario == "hang" && myRank == 1) &&
        !(args.scenario == "p2p" && myRank != 1))
      say("operation 6 did not fail");
  } catch (const strata::Error& e) {
    say(std::string("failed as planned: ") + e.what());
  }
  strata::finalize();
  return finish(args);
}
