#include "model.h"

namespace lm {

GptModel describeGpt(const GptConfig& cfg) {
  strata::LayerList blocks;
  for (int64_t i = 0; i < cfg.layers; ++i) blocks.add<Block>(std::to_string(i), cfg);
  GptModel m;
  m.layers.add<Embeddings>("embed", cfg)
      .add("blocks", blocks)  // layers "blocks.0", "blocks.1", ...: a pipeline cuts between blocks
      .add<FinalNorm>("ln_f", cfg)
      .add<LmHead>("head", cfg)  // its own weight, made the token embedding's by the tie
      .tie("embed.token.weight", "head.weight");
  m.tiedAliases["head.weight"] = "embed.token.weight";
  return m;
}

}  // namespace lm
