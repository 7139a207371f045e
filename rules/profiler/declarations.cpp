// The profiler (metric) rules' parameters (specs/smdebug.md §3.1): SageMaker's names, the
// defaults the rules in this folder use. Each also takes its base class's scan_interval_us and
// compat (default: the engine's mode, see BuiltinContext); metricRuleDecl adds them.
#include "rules/declarations.h"

namespace strata::rules {
namespace {

using K = ParamKind;

const ParamDecl kPatience1000{"patience", K::kCount, 1000};

// CPUBottleneck and IOBottleneck: one rule class, `high` names the host-side threshold.
RuleDecl bottleneckDecl(std::string name, std::string high, int highDefault) {
  return metricRuleDecl(std::move(name), {{"threshold", K::kPercent, 50},
                                          {"gpu_threshold", K::kPercent, 10},
                                          {std::move(high), K::kPercent, highDefault},
                                          kPatience1000});
}

}  // namespace

std::vector<RuleDecl> profilerRuleDecls() {
  std::vector<RuleDecl> decls = {
      bottleneckDecl("CPUBottleneck", "cpu_threshold", 90),
      bottleneckDecl("IOBottleneck", "io_threshold", 50),
      metricRuleDecl("LowGPUUtilization", {{"threshold_p95", K::kPercent, 70},
                                           {"threshold_p5", K::kPercent, 10},
                                           {"window", K::kPositiveInt, 500},
                                           kPatience1000}),
      metricRuleDecl("GPUMemoryIncrease",
                     {{"increase", K::kPercent, 5}, kPatience1000, {"window", K::kPositiveInt, 10}}),
      metricRuleDecl("BatchSize", {{"cpu_threshold_p95", K::kPercent, 70},
                                   {"gpu_threshold_p95", K::kPercent, 70},
                                   {"gpu_memory_threshold_p95", K::kPercent, 70},
                                   kPatience1000,
                                   {"window", K::kPositiveInt, 500}}),
      // compat mode's default is the reference code's 0.2 (rules/profiler/load_balancing.cpp).
      metricRuleDecl("LoadBalancing", {{"threshold", K::kFraction, 0.5}, kPatience1000}),
      metricRuleDecl("MaxInitializationTime", {{"threshold", K::kNonNegative, 20}}),
      metricRuleDecl("StepOutlier", {{"stddev", K::kNonNegative, 3},
                                     {"mode", K::kString, nullptr},
                                     {"n_outliers", K::kCount, 10}}),
      metricRuleDecl("Dataloader",
                     {{"min_threshold", K::kNonNegative, 70},
                      {"max_threshold", K::kNonNegative, 200},
                      {"patience", K::kCount, 10},
                      // Strata: % of a step spent waiting for data.
                      {"wait_threshold", K::kNonNegative, 50}}),
      metricRuleDecl("OverallSystemUsage", {}),
      metricRuleDecl("OverallFrameworkMetrics", {}),
      // A group: rules/builtin.cpp makeProfilerReportRules reads these and passes the
      // sub-rules' "<SubRule>_<param>" overrides on.
      metricRuleDecl("ProfilerReport",
                     {{"nb_path", K::kString, nullptr}, {"opt_out_telemetry", K::kBool, nullptr}}),
  };
  return decls;
}

}  // namespace strata::rules
