// `strata trial RUN_DIR [--tensor NAME] [--steps]`: what a run's debugger saved (tensor
// names, steps, values), read with the same Trial API the rule engine uses. Works on trials
// written by smdebug too.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command_registry.h"
#include "debugger/trial.h"
#include "debugger/trial_report.h"

namespace strata::cli {
namespace {

struct TrialArgs {
  std::string runDir;
  std::string tensor;
  bool steps = false;
  std::string collection;
  std::string mode;
  std::string worker;
  size_t maxValues = 8;
};

int runTrial(const TrialArgs& args) {
  using namespace strata::debugger;
  TrialReportOptions options;
  options.collection = args.collection;
  options.worker = args.worker;
  options.maxValues = args.maxValues;
  if (!args.mode.empty()) {
    if (!parseModeName(args.mode, &options.mode)) {
      std::fprintf(stderr, "strata trial: unknown mode \"%s\" (TRAIN, EVAL, PREDICT)\n", args.mode.c_str());
      return 2;
    }
    options.allModes = false;
  }
  try {
    Trial trial(args.runDir);
    std::string text;
    if (args.steps) text += trialSteps(trial);
    if (!args.tensor.empty()) text += tensorReport(trial, args.tensor, options);
    if (text.empty()) text = trialSummary(trial, options);
    std::fwrite(text.data(), 1, text.size(), stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata trial: %s\n", e.what());
    return 1;
  }
  return 0;
}

const CommandRegistrar registrar("trial", [](CLI::App& app, int& exitCode) {
  auto args = std::make_shared<TrialArgs>();
  CLI::App* cmd = app.add_subcommand(
      "trial", "List the tensors, steps and values a run's debugger saved (smdebug trial layout)");
  cmd->add_option("RUN_DIR", args->runDir, "The run's output_dir (the trial directory)")->required();
  cmd->add_option("--tensor", args->tensor, "Print this tensor's values at every saved step");
  cmd->add_flag("--steps", args->steps, "Print every step: mode, mode step, workers, completeness");
  cmd->add_option("--collection", args->collection, "List only the tensors of this collection");
  cmd->add_option("--mode", args->mode, "With --tensor: only steps of TRAIN, EVAL or PREDICT");
  cmd->add_option("--worker", args->worker, "With --tensor: only this worker's values");
  cmd->add_option("--max-values", args->maxValues, "Elements printed per value")->capture_default_str();
  cmd->callback([args, &exitCode] { exitCode = runTrial(*args); });
});

}  // namespace
}  // namespace strata::cli
