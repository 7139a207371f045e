// `strata rules RUN_DIR [--watch]`: evaluates the configured rules on a run, after the fact or
// while it is written, and writes rule-output/ (docs/rules.md).
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "cli/command_registry.h"
#include "core/errors.h"
#include "rules/report/html_report.h"
#include "rules/run.h"

namespace strata::cli {
namespace {

std::atomic<bool> gInterrupted{false};

void onSignal(int) { gInterrupted = true; }

void printFinding(const rules::Finding& f) {
  std::printf("  %-24s %s%s\n", f.rule.c_str(), f.step >= 0 ? ("step " + std::to_string(f.step) + ": ").c_str() : "",
              f.message.c_str());
  std::fflush(stdout);
}

struct Options {
  std::string runDir, rulesFile;
  bool watch = false, compat = false, report = false;
  double intervalSec = 10;
};

int run(const Options& o) {
  bool compat = o.compat;
  std::string source;
  const std::vector<rules::RuleSpec> specs = rules::loadRuleSpecs(o.runDir, o.rulesFile, &compat, &source);
  if (specs.empty()) {
    std::fprintf(stderr, "strata rules: %s has neither tensors nor profiler data, and no rules are configured\n",
                 o.runDir.c_str());
    return 1;
  }
  rules::EngineOptions eo;
  eo.runDir = o.runDir;
  eo.compat = compat;
  eo.writeStopFile = o.watch;
  rules::FileSourceOptions so;
  so.follow = o.watch;
  auto engine = rules::makeRunEngine(o.runDir, specs, eo, so);
  std::printf("strata rules: %zu rule(s) from %s%s on %s\n", engine->summary().size(), source.c_str(),
              compat ? " (compat mode)" : "", o.runDir.c_str());
  if (o.watch) {
    std::signal(SIGINT, onSignal);
    std::signal(SIGTERM, onSignal);
    std::printf("watching (Ctrl-C to stop); findings:\n");
    while (!gInterrupted && !engine->dataEnded()) {
      for (const auto& f : engine->poll()) printFinding(f);
      for (int i = 0; i < static_cast<int>(o.intervalSec * 10) && !gInterrupted && !engine->dataEnded(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  if (!o.watch) std::printf("findings:\n");
  size_t shown = 0;
  for (const auto& f : engine->poll()) shown += (printFinding(f), 1);
  for (const auto& f : engine->finish()) shown += (printFinding(f), 1);
  if (shown == 0 && !o.watch) std::printf("  (none: no rule found an issue)\n");
  return rules::printRunSummary(*engine, o.runDir, o.report);
}

const CommandRegistrar registrar("rules", [](CLI::App& app, int& exitCode) {
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("rules", "Evaluate the configured rules on a run (live with --watch)");
  cmd->add_option("RUN_DIR", opts->runDir, "the run's output_dir")->required()->check(CLI::ExistingDirectory);
  cmd->add_flag("--watch", opts->watch, "follow the files while the job writes them, until training_job_end.ts");
  cmd->add_option("--rules", opts->rulesFile,
                  "a rules file ({\"compat\", \"rules\": [...]}) or job config; default: RUN_DIR/rules.json, "
                  "RUN_DIR/job.json, then ProfilerReport and the basic tensor rules");
  cmd->add_flag("--compat", opts->compat, "reproduce SageMaker's reference verdicts, bugs included");
  cmd->add_option("--interval", opts->intervalSec, "seconds between polls with --watch")->check(CLI::PositiveNumber);
  cmd->add_flag("--report", opts->report, "also write rule-output/profiler-report.html");
  cmd->callback([opts, &exitCode] { runReportingErrors("rules", exitCode, [&] { return run(*opts); }); });
});

}  // namespace

}  // namespace strata::cli
