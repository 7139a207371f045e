// `strata breakdown RUN_DIR`: where each rank's time went in the profiler's timeline (compute,
// communication not hidden by compute, pipeline wait, data loading, idle), how much of the
// communication overlapped compute, and which rank or pipeline stage is the slow one
// (profiler/breakdown.h).
#include <cstdio>
#include <fstream>
#include <string>

#include "cli/command_registry.h"
#include "core/atomic_file.h"
#include "profiler/breakdown.h"

namespace strata::cli {
namespace {

struct BreakdownArgs {
  std::string runDir;
  std::string json;
  bool closedOnly = false;
};

std::string share(int64_t us, int64_t periodUs) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%5.1f%% %8.1f ms", periodUs > 0 ? 100.0 * us / periodUs : 0.0, us / 1000.0);
  return buf;
}

std::string stagesOf(const profiler::RankTime& r) {
  if (r.stages.empty()) return "-";
  std::string out;
  for (size_t i = 0; i < r.stages.size(); ++i) out += (i ? "," : "") + std::to_string(r.stages[i]);
  return out;
}

void printTable(const profiler::Breakdown& b) {
  std::printf("%-5s %-7s %6s %11s  %-17s %-17s %-17s %-17s %-17s %8s\n", "rank", "stages", "steps", "period",
              "compute", "exposed comm", "pipeline wait", "data loading", "idle", "overlap");
  for (const profiler::RankTime& r : b.ranks) {
    const auto overlap = r.overlapPercent();
    char ov[16] = "-";
    if (overlap) std::snprintf(ov, sizeof ov, "%.1f%%", *overlap);
    std::printf("%-5d %-7s %6lld %9.1f ms  %-17s %-17s %-17s %-17s %-17s %8s\n", r.rank, stagesOf(r).c_str(),
                static_cast<long long>(r.steps), r.periodUs / 1000.0, share(r.computeUs, r.periodUs).c_str(),
                share(r.exposedCommUs, r.periodUs).c_str(), share(r.pipelineWaitUs, r.periodUs).c_str(),
                share(r.dataLoadingUs, r.periodUs).c_str(), share(r.idleUs, r.periodUs).c_str(), ov);
  }
}

int runBreakdown(const BreakdownArgs& args) {
  size_t files = 0;
  const profiler::Breakdown b = profiler::breakdownOfRun(args.runDir, args.closedOnly, {}, &files);
  if (b.ranks.empty()) {
    std::fprintf(stderr,
                 "strata breakdown: no framework timeline under %s (%zu trace file(s)); the profiler records one "
                 "inside its framework_profile window\n",
                 args.runDir.c_str(), files);
    return 1;
  }
  std::printf("strata breakdown: %s, %zu rank(s), %zu trace file(s)\n\n", b.layout.c_str(), b.ranks.size(), files);
  printTable(b);
  std::printf("\n");
  for (const profiler::Straggler& s : b.stragglers) std::printf("straggler: %s\n", s.evidence.c_str());
  if (b.slowStage) std::printf("slow stage: %s\n", b.slowStage->evidence.c_str());
  if (b.stragglers.empty() && !b.slowStage) std::printf("no straggler rank and no slow stage\n");
  if (!args.json.empty()) {
    createOutputFile(args.json);
    std::ofstream out(args.json);
    out << profiler::toJson(b).dump(1) << "\n";
    if (!out) {
      std::fprintf(stderr, "strata breakdown: cannot write %s\n", args.json.c_str());
      return 1;
    }
  }
  return 0;
}

const CommandRegistrar registrar("breakdown", [](CLI::App& app, int& exitCode) {
  auto args = std::make_shared<BreakdownArgs>();
  CLI::App* cmd = app.add_subcommand(
      "breakdown", "Where each rank's time went (compute, exposed communication, pipeline wait, data loading, "
                   "idle), overlap, stragglers");
  cmd->add_option("RUN_DIR", args->runDir, "The run's output_dir (or its profiler-output)")->required();
  cmd->add_option("--json", args->json, "Also write the breakdown as JSON to this file");
  cmd->add_flag("--closed-only", args->closedOnly, "Skip trace files still open (.tmp)");
  cmd->callback([args, &exitCode] { exitCode = runBreakdown(*args); });
});

}  // namespace
}  // namespace strata::cli
