// The transformer LM as Strata trains it: the layers in order (embeddings, the blocks, the
// final LayerNorm, the tied head) and the tie between the head and the token embedding.
#pragma once

#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <map>
#include <string>

#include "gpt.h"

namespace lm {

struct GptModel {
  torch::nn::Sequential net;
  // Paths of tied copies -> the canonical path ("head.weight" -> "embed.token.weight").
  std::map<std::string, std::string> tiedAliases;
};

// Builds the model from `seed` (the initial weights do not depend on the layout).
GptModel buildGpt(const GptConfig& cfg, uint64_t seed);

}  // namespace lm
