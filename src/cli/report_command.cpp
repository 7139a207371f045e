// `strata report RUN_DIR`: writes RUN_DIR/rule-output/profiler-report.html from the rule
// results, running the rules first when there are none (or with --rerun).
#include <cstdio>
#include <filesystem>

#include "cli/command_registry.h"
#include "rules/report/html_report.h"
#include "rules/run.h"

namespace strata::cli {
namespace {

struct Options {
  std::string runDir, rulesFile;
  bool rerun = false, compat = false;
};

bool haveResults(const std::string& runDir) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::path(runDir) / "rule-output" / "summary.json", ec);
}

int run(const Options& o) {
  int code = 0;
  if (o.rerun || !haveResults(o.runDir)) {
    bool compat = o.compat;
    std::string source;
    auto specs = rules::loadRuleSpecs(o.runDir, o.rulesFile, &compat, &source);
    // The report needs ProfilerReport's sub-rules even when the job configured none.
    bool hasReport = false;
    for (const auto& s : specs) hasReport |= s.name == "ProfilerReport";
    if (!hasReport && rules::makeProfilerSource(o.runDir, {}) != nullptr) specs.emplace_back("ProfilerReport");
    if (specs.empty()) {
      std::fprintf(stderr, "strata report: %s has no profiler data, tensors or rule results\n", o.runDir.c_str());
      return 1;
    }
    rules::EngineOptions eo;
    eo.runDir = o.runDir;
    eo.compat = compat;
    auto engine = rules::makeRunEngine(o.runDir, specs, eo, {});
    std::printf("strata report: running %zu rule(s) from %s\n", engine->summary().size(), source.c_str());
    engine->finish();
    code = rules::printRunSummary(*engine, o.runDir, false);
  }
  std::printf("Report: %s\n", rules::report::writeReport(o.runDir).c_str());
  return code;
}

const CommandRegistrar registrar("report", [](CLI::App& app, int& exitCode) {
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("report", "Write the HTML profiling report of a run");
  cmd->add_option("RUN_DIR", opts->runDir, "the run's output_dir")->required()->check(CLI::ExistingDirectory);
  cmd->add_flag("--rerun", opts->rerun, "evaluate the rules again even if rule-output/ has results");
  cmd->add_option("--rules", opts->rulesFile, "rules file or job config (as for `strata rules`)");
  cmd->add_flag("--compat", opts->compat, "reproduce SageMaker's reference verdicts when running the rules");
  cmd->callback([opts, &exitCode] { runReportingErrors("report", exitCode, [&] { return run(*opts); }); });
});

}  // namespace
}  // namespace strata::cli
