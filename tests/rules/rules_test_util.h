// Synthetic streams for the rule tests: system snapshots, step and timeline events, and a
// one-rule offline run through the engine.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/errors.h"
#include "rules/engine.h"
#include "rules/memory_sources.h"

namespace strata::rules::testing {

using strata::ConfigError;

constexpr int64_t kT0 = 1599999960LL * 1000000;  // a whole minute (2020-09-13 12:26 UTC), µs
constexpr int64_t kSec = 1000000;

// One system snapshot of a node: all metrics at the same timestamp.
struct Snapshot {
  std::vector<double> cpu, gpu, gpuMem, io;
  double hostMem = -1;
};

// An empty directory strata_<name>_<pid> under the system's temporary directory (emptied if
// a previous run left it).
inline std::filesystem::path freshTempDir(const std::string& name) {
  const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("strata_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

inline void addSnapshot(VectorMetricSource& src, int64_t tUs, const std::string& node, const Snapshot& s) {
  for (size_t i = 0; i < s.cpu.size(); ++i) src.push(makeSample(tUs, node, "CPUUtilization", "cpu" + std::to_string(i), s.cpu[i]));
  for (size_t i = 0; i < s.io.size(); ++i) src.push(makeSample(tUs, node, "I/OWaitPercentage", "cpu" + std::to_string(i), s.io[i]));
  for (size_t i = 0; i < s.gpu.size(); ++i) src.push(makeSample(tUs, node, "GPUUtilization", "gpu" + std::to_string(i), s.gpu[i]));
  for (size_t i = 0; i < s.gpuMem.size(); ++i)
    src.push(makeSample(tUs, node, "GPUMemoryUtilization", "gpu" + std::to_string(i), s.gpuMem[i]));
  if (s.hostMem >= 0) src.push(makeSample(tUs, node, "", "MemoryUsedPercent", s.hostMem));
}

inline FrameworkEvent event(int rank, const std::string& phase, const std::string& name, int64_t startUs, int64_t durUs,
                            int64_t step = -1) {
  FrameworkEvent e;
  e.rank = rank;
  e.node = "algo-1-" + std::to_string(rank);
  e.phase = phase;
  e.name = name;
  e.startUs = startUs;
  e.endUs = startUs + durUs;
  e.step = step;
  return e;
}

inline FrameworkEvent stepEvent(int rank, int64_t step, int64_t startUs, int64_t durUs) {
  return event(rank, "Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", startUs, durUs, step);
}

// Compat mode analyses only windows that start before the newest file stamp (the reference
// never analyses the last minute); this marks a stream as recorded for an hour so that every
// window of a short synthetic stream is analysed.
inline std::unique_ptr<VectorMetricSource> analysedToTheEnd(std::unique_ptr<VectorMetricSource> src) {
  src->setFileStamps(std::nullopt, kT0 + 3600 * kSec);
  return src;
}

struct RunResult {
  std::vector<Finding> findings;
  nlohmann::json report;  // rule-output/<Rule>.json content
  RuleSummary summary;
};

// Runs the engine's one rule `name` over its source to the end: every finding, the rule's
// report and its summary.
inline RunResult runToEnd(Engine& engine, const std::string& name) {
  RunResult r;
  r.findings = engine.poll();
  for (auto& f : engine.finish()) r.findings.push_back(f);
  r.report = engine.reportJson(name);
  for (const auto& s : engine.summary())
    if (s.name == name) r.summary = s;
  return r;
}

// Runs one rule offline over the source (consumed) and returns its findings and report.
inline RunResult runMetricRule(const std::string& name, nlohmann::json params,
                               std::unique_ptr<VectorMetricSource> src, bool compat = false) {
  EngineOptions opts;
  opts.compat = compat;
  Engine engine(opts);
  engine.addRules({RuleSpec{name, std::move(params)}});
  src->finish();
  engine.setMetricSource(std::move(src));
  return runToEnd(engine, name);
}

// Runs one tensor rule over a trial; returns findings (their steps tell when it fired).
inline RunResult runTensorRule(const std::string& name, nlohmann::json params, const MemoryTrial& trial) {
  Engine engine;
  engine.addRules({RuleSpec{name, std::move(params)}});
  auto src = std::make_unique<MemoryTensorSource>();
  src->mutableTrial() = trial;
  engine.setTensorSource(std::move(src));
  return runToEnd(engine, name);
}

inline std::vector<int64_t> stepsOf(const std::vector<Finding>& findings) {
  std::vector<int64_t> out;
  for (const auto& f : findings) out.push_back(f.step);
  return out;
}

}  // namespace strata::rules::testing
