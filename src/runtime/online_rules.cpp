#include "runtime/online_rules.h"

#include "core/logging.h"
#include "debugger/naming.h"
#include "debugger/step_tap.h"
#include "pipeline/topology.h"

namespace strata::runtime {

bool evaluatesOwnTensors(int rank, int worldSize, const config::JobConfig& config) {
  if (!config.debugger.enabled()) return false;
  if (config.debugger.includeWorkers != "all") return rank == 0;
  const config::ModelParallelConfig& mp = config.modelParallel;
  const pipeline::Topology t =
      pipeline::makeTopology(worldSize, mp.enabled ? mp.partitions : 1, pipeline::parsePlacement(mp.placementStrategy));
  const std::string mine = debugger::workerNameForRank(rank);
  for (int r : t.dataParallelGroups.at(static_cast<size_t>(t.ppRankOf.at(static_cast<size_t>(rank)))))
    if (debugger::workerNameForRank(r) < mine) return false;
  return true;
}

std::vector<std::string> collectionsFilledElsewhere(int rank, int worldSize, const config::JobConfig& config) {
  const config::ModelParallelConfig& mp = config.modelParallel;
  if (!mp.enabled || mp.partitions <= 1) return {};
  const pipeline::Topology t = pipeline::makeTopology(worldSize, mp.partitions, pipeline::parsePlacement(mp.placementStrategy));
  // The last global stage (chunk * partitions + pipeline rank) is on pipeline rank partitions - 1.
  if (t.ppRankOf.at(static_cast<size_t>(rank)) == mp.partitions - 1) return {};
  return {"losses"};
}

std::unique_ptr<rules::OnlineEngine> startInProcessRules(const config::JobConfig& config, int rank, int worldSize) {
  if (config.rules.empty() || !evaluatesOwnTensors(rank, worldSize, config)) return nullptr;
  try {
    const std::vector<rules::RuleSpec> specs = rules::inProcessSpecs(rules::specsFromConfig(config.rules), false);
    if (specs.empty()) return nullptr;
    rules::OnlineEngineOptions o;
    o.runDir = config.outputDir;
    o.worker = debugger::workerNameForRank(rank);
    o.collectionsFilledElsewhere = collectionsFilledElsewhere(rank, worldSize, config);
    auto engine = std::make_unique<rules::OnlineEngine>(specs, o);
    debugger::setStepTap(engine->feed());
    STRATA_LOG(kInfo, kRules, "in-process rules: ", specs.size(), " tensor rule(s) on ", o.worker,
               "'s data, evaluated as each step completes");
    return engine;
  } catch (const std::exception& e) {
    STRATA_LOG(kError, kRules, "in-process rules not started: ", e.what());
    return nullptr;
  }
}

void stopInProcessRules(std::unique_ptr<rules::OnlineEngine>& engine) {
  if (!engine) return;
  debugger::setStepTap(nullptr);
  try {
    engine->stop();
  } catch (const std::exception& e) {
    STRATA_LOG(kError, kRules, "in-process rules: stopping failed: ", e.what());
  }
  engine.reset();
}

}  // namespace strata::runtime
