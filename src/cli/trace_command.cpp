// `strata trace RUN_DIR -o merged.json`: merges every rank's framework timeline of a run
// into one trace for Perfetto (ui.perfetto.dev) or chrome://tracing (pid = rank).
#include <cstdio>
#include <fstream>
#include <string>

#include "cli/command_registry.h"
#include "core/atomic_file.h"
#include "profiler/layout.h"
#include "profiler/trace_merge.h"

namespace strata::cli {
namespace {

struct TraceArgs {
  std::string runDir;
  std::string output = "merged.json";
  bool closedOnly = false;
};

int runTrace(const TraceArgs& args) {
  const std::string root = profiler::resolveProfilerRoot(args.runDir);
  const profiler::MergedTrace trace = profiler::mergeTimelines(root, !args.closedOnly);
  if (trace.report.files == 0) {
    std::fprintf(stderr, "strata trace: no trace files under %s/framework\n", root.c_str());
    return 1;
  }
  createOutputFile(args.output);  // the run's timelines: as private as they are
  std::ofstream out(args.output, std::ios::binary);
  if (out) profiler::writeMergedTrace(trace, out);
  out.close();
  if (!out) {
    std::fprintf(stderr, "strata trace: cannot write %s\n", args.output.c_str());
    return 1;
  }
  const auto& r = trace.report;
  std::printf("merged %zu slices of %zu process(es) from %zu file(s) into %s\n", r.slices,
              r.ranks, r.files, args.output.c_str());
  if (r.movedForNesting > 0)
    std::printf("moved %zu overlapping slice(s) to overlap tracks\n", r.movedForNesting);
  if (r.badLines > 0) std::printf("skipped %zu unreadable line(s)\n", r.badLines);
  return 0;
}

const CommandRegistrar registrar("trace", [](CLI::App& app, int& exitCode) {
  auto args = std::make_shared<TraceArgs>();
  CLI::App* cmd = app.add_subcommand(
      "trace", "Merge all ranks' profiler timelines into one Perfetto/chrome://tracing file");
  cmd->add_option("RUN_DIR", args->runDir, "The run's output_dir (or its profiler-output)")
      ->required();
  cmd->add_option("-o,--output", args->output, "Merged trace file to write")
      ->capture_default_str();
  cmd->add_flag("--closed-only", args->closedOnly,
                "Skip trace files still open (.tmp), e.g. of a crashed or running job");
  cmd->callback([args, &exitCode] { exitCode = runTrace(*args); });
});

}  // namespace
}  // namespace strata::cli
