// A GPT-style decoder-only language model over bytes, written with plain libtorch modules:
// token and position embeddings, pre-norm blocks (LayerNorm, causal multi-head
// self-attention, LayerNorm, MLP with GELU, both residual), a final LayerNorm and an LM head
// whose weight is the token embedding's (tied).
//
// libtorch 1.13 has no fused scaled-dot-product attention, so attention is spelled out:
// q/k/v projections, scores scaled by 1/sqrt(head_dim), a causal mask, softmax, dropout, the
// weighted sum of the values and an output projection.
//
// Initialisation follows GPT-2: weights N(0, 0.02), biases 0, LayerNorm 1/0, and the two
// projections that write into the residual stream N(0, 0.02/sqrt(2·layers)). Each module
// draws from the default CPU generator when it is constructed.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <string>

namespace lm {

struct GptConfig {
  int64_t vocab = 256;  // byte-level tokens
  int64_t seqLen = 64;  // context length (rows of the position embedding)
  int64_t dModel = 128;
  int64_t heads = 4;
  int64_t layers = 2;
  double dropout = 0.1;

  // Why this configuration cannot be built ("" when it can).
  std::string invalidReason() const;
  // Parameters of the model, the tied head counted once.
  int64_t numParameters() const;
};

// [B, T] int64 tokens -> [B, T, d]: token embedding + position embedding, then dropout.
class EmbeddingsImpl : public torch::nn::Module {
 public:
  explicit EmbeddingsImpl(const GptConfig& cfg);
  torch::Tensor forward(const torch::Tensor& tokens);

  torch::nn::Embedding token{nullptr};
  torch::nn::Embedding position{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(Embeddings);

// Causal multi-head self-attention: [B, T, d] -> [B, T, d].
class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const GptConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear qkv{nullptr};   // d -> 3d: queries, keys and values of every head
  torch::nn::Linear proj{nullptr};  // d -> d, into the residual stream
  torch::nn::Dropout attnDropout{nullptr};
  torch::nn::Dropout residDropout{nullptr};

 private:
  int64_t heads_;
};
TORCH_MODULE(CausalSelfAttention);

// Position-wise MLP: d -> 4d -> GELU -> d, dropout.
class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const GptConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear fc{nullptr};
  torch::nn::Linear proj{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(Mlp);

// One pre-norm transformer block: x + attn(ln1(x)), then + mlp(ln2(.)).
class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const GptConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::LayerNorm ln1{nullptr};
  CausalSelfAttention attn{nullptr};
  torch::nn::LayerNorm ln2{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(Block);

// The final LayerNorm: its own layer so a pipeline may cut before it.
class FinalNormImpl : public torch::nn::Module {
 public:
  explicit FinalNormImpl(const GptConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::LayerNorm ln{nullptr};
};
TORCH_MODULE(FinalNorm);

// [B, T, d] -> [B, T, vocab] logits with a [vocab, d] weight and no bias. The weight is
// registered as "weight": pass the token embedding's to tie them in one process, or let
// it allocate its own (initialised like the embedding) when another stage holds the tie.
class LmHeadImpl : public torch::nn::Module {
 public:
  LmHeadImpl(const GptConfig& cfg, torch::Tensor tiedWeight = {});
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight;
};
TORCH_MODULE(LmHead);

}  // namespace lm
