#include "pipeline/ties.h"

#include <algorithm>

#include "core/errors.h"

namespace strata::pipeline {

TiePlacement placeTie(const std::vector<int>& memberLayers, const std::vector<int>& stageOfLayer, int partitions) {
  STRATA_CHECK(partitions >= 1 && !memberLayers.empty(), "placeTie: needs members and partitions >= 1");
  TiePlacement tie;
  for (int layer : memberLayers) {
    STRATA_CHECK(layer >= 0 && layer < static_cast<int>(stageOfLayer.size()), "placeTie: layer ", layer,
                 " is not one of the ", stageOfLayer.size(), " layers");
    tie.stages.push_back(stageOfLayer[static_cast<size_t>(layer)]);
  }
  std::sort(tie.stages.begin(), tie.stages.end());
  tie.stages.erase(std::unique(tie.stages.begin(), tie.stages.end()), tie.stages.end());
  for (int s : tie.stages) tie.ranks.push_back(s % partitions);
  std::sort(tie.ranks.begin(), tie.ranks.end());
  tie.ranks.erase(std::unique(tie.ranks.begin(), tie.ranks.end()), tie.ranks.end());
  tie.ownerStage = tie.stages.front();
  tie.ownerRank = tie.ownerStage % partitions;
  return tie;
}

std::vector<int> contributionOrder(const TiePlacement& tie) {
  return std::vector<int>(tie.stages.rbegin(), tie.stages.rend() - 1);
}

}  // namespace strata::pipeline
