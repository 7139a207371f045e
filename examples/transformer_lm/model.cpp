#include "model.h"

#include <torch/utils.h>

namespace lm {

GptModel buildGpt(const GptConfig& cfg, uint64_t seed) {
  torch::manual_seed(seed);
  GptModel m;
  Embeddings embed(cfg);
  m.net->push_back("embed", embed);
  for (int64_t i = 0; i < cfg.layers; ++i) m.net->push_back("block" + std::to_string(i), Block(cfg));
  m.net->push_back("ln_f", FinalNorm(cfg));
  m.net->push_back("head", LmHead(cfg, embed->token->weight));
  m.tiedAliases["head.weight"] = "embed.token.weight";
  return m;
}

}  // namespace lm
