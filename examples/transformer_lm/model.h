// The transformer LM as Strata trains it: a LayerList (strata/layer_list.h) of the layers in
// order (embeddings, the blocks as a group, the final LayerNorm, the head) with the head's
// weight tied to the token embedding. Nothing is built here: DistributedModel builds only
// the layers of this rank's pipeline stages (every layer in one process or data parallel).
#pragma once

#include <map>
#include <string>

#include "gpt.h"
#include "strata/layer_list.h"

namespace lm {

struct GptModel {
  strata::LayerList layers;
  // Paths of tied copies -> the canonical path ("head.weight" -> "embed.token.weight").
  std::map<std::string, std::string> tiedAliases;
};

// The model's description. Its initial weights come from the default CPU generator's seed
// on world rank 0 when DistributedModel is constructed (torch::manual_seed first): each
// layer is seeded from it and its path, so they do not depend on the layout.
GptModel describeGpt(const GptConfig& cfg);

}  // namespace lm
