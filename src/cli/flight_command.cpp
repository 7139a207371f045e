// `strata flight RUN_DIR [--json]`: merges every rank's flight recorder dump
// (RUN_DIR/flight/rank-<r>.json) and names the first operation where the ranks parted
// ways: a mismatch, a rank that never arrived or left no dump, and who is behind.
// Exit code: 0 the ranks agree, 1 a problem was found, 2 no dump could be read. The reading,
// analysis and report are the strata_flight_analysis library beside it (src/cli/flight/).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "cli/command_registry.h"
#include "cli/flight/report.h"

namespace strata::cli {
namespace {

namespace fs = std::filesystem;

struct FlightArgs {
  std::string runDir;
  bool json = false;
  int worldSize = 0;
  double stuckSeconds = 1.0;
};

// RUN_DIR/flight, or RUN_DIR itself when it holds the dumps.
std::string dumpDirOf(const std::string& runDir) {
  const fs::path nested = fs::path(runDir) / "flight";
  return fs::is_directory(nested) ? nested.string() : runDir;
}

struct LoadedDumps {
  std::map<int, flight::RankDump> dumps;
  flight::UnreadableDumps unreadable;
};

LoadedDumps loadDumps(const std::string& dir) {
  LoadedDumps loaded;
  const std::regex name(R"(rank-([0-9]+)\.json)");
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string file = item.path().filename().string();
    if (!std::regex_match(file, m, name)) continue;
    const int rank = std::stoi(m[1]);
    try {
      std::ifstream in(item.path(), std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      flight::RankDump dump = flight::parseDump(nlohmann::json::parse(text.str()), item.path().string());
      if (dump.header.rank != rank) {
        loaded.unreadable[rank] = "the file says rank " + std::to_string(dump.header.rank);
        continue;
      }
      loaded.dumps.emplace(rank, std::move(dump));
    } catch (const std::exception& e) {
      loaded.unreadable[rank] = e.what();
    }
  }
  return loaded;
}

int runFlight(const FlightArgs& args) {
  const std::string dir = dumpDirOf(args.runDir);
  const LoadedDumps loaded = loadDumps(dir);
  if (loaded.dumps.empty()) {
    std::fprintf(stderr, "strata flight: no readable flight recorder dump (rank-<r>.json) in %s\n", dir.c_str());
    for (const auto& [rank, why] : loaded.unreadable) std::fprintf(stderr, "  rank %d: %s\n", rank, why.c_str());
    return 2;
  }
  flight::AnalysisOptions options;
  options.worldSize = args.worldSize;
  options.stuckSeconds = args.stuckSeconds;
  const flight::Analysis analysis = flight::analyze(loaded.dumps, options);
  if (args.json) {
    std::printf("%s\n", flight::analysisToJson(analysis, loaded.dumps, loaded.unreadable).dump(2).c_str());
  } else {
    std::printf("%s", flight::formatAnalysis(analysis, loaded.dumps, loaded.unreadable).c_str());
  }
  return analysis.healthy() ? 0 : 1;
}

const CommandRegistrar registrar("flight", [](CLI::App& app, int& exitCode) {
  auto args = std::make_shared<FlightArgs>();
  CLI::App* cmd = app.add_subcommand(
      "flight", "Merge all ranks' flight recorder dumps and name the first operation where they disagree");
  cmd->add_option("RUN_DIR", args->runDir, "The run's output_dir (or its flight/ folder)")->required();
  cmd->add_flag("--json", args->json, "Print the analysis as JSON");
  cmd->add_option("--world-size", args->worldSize,
                  "Ranks in the job (default: from the dumps; set it when the last ranks left none)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--stuck-seconds", args->stuckSeconds,
                  "An operation still running this long at the dump counts as held up")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->callback([args, &exitCode] { exitCode = runFlight(*args); });
});

}  // namespace
}  // namespace strata::cli
