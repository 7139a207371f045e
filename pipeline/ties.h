// Tied parameters across pipeline stages (pure): which stages and ranks hold a copy of a
// shared tensor, and in which order the owner adds the others' gradient contributions.
//
// A tie group is a tensor used by several layers (an embedding and the LM head). Every
// stage that holds one of those layers holds the tensor (one copy per rank: stages of one
// rank share it). After each microbatch's backward, the other holding stages send their
// gradient contribution to the owner (the first holding stage), which adds them to its own
// right before autograd accumulates it: per microbatch, contributions of later stages
// first, then its own, the order in which one process's autograd sums the uses of one
// tensor. After the step the owner's gradient (data-parallel reduced) goes to the other
// holders, so every copy takes the same optimizer step and stays bitwise equal.
#pragma once

#include <vector>

namespace strata::pipeline {

struct TiePlacement {
  std::vector<int> stages;  // global stages holding a member, ascending; stages[0] is the owner
  std::vector<int> ranks;   // pipeline ranks holding a member, ascending
  int ownerStage = 0;
  int ownerRank = 0;

  bool acrossStages() const { return stages.size() > 1; }
  bool acrossRanks() const { return ranks.size() > 1; }
};

// memberLayers: the layers using the tensor; stageOfLayer: the partition; stage k lives on
// pipeline rank k % partitions. Throws strata::Error for a member layer out of range.
TiePlacement placeTie(const std::vector<int>& memberLayers, const std::vector<int>& stageOfLayer, int partitions);

// The stages whose contributions the owner adds for one microbatch, in the order it adds
// them (descending: the last stage first).
std::vector<int> contributionOrder(const TiePlacement& tie);

// A contribution on the wire: microbatch and the stage that produced it. A rank sends its
// contributions to the owner in ascending (microbatch, descending stage) order, the order
// the owner consumes them, so one FIFO channel per rank pair suffices.
struct TieContribution {
  int microbatch = 0;
  int stage = 0;
  bool operator<(const TieContribution& o) const {
    return microbatch != o.microbatch ? microbatch < o.microbatch : stage > o.stage;
  }
};

}  // namespace strata::pipeline
