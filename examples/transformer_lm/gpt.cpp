#include "gpt.h"

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/linear.h>
#include <torch/nn/init.h>
#include <torch/types.h>

#include <cmath>
#include <limits>

namespace lm {
namespace {

constexpr double kInitStd = 0.02;  // GPT-2's weight scale

torch::nn::Linear linear(int64_t in, int64_t out, double stddev) {
  torch::nn::Linear layer(torch::nn::LinearOptions(in, out));
  torch::NoGradGuard noGrad;
  torch::nn::init::normal_(layer->weight, 0.0, stddev);
  torch::nn::init::zeros_(layer->bias);
  return layer;
}

// Residual projections are scaled down with depth (GPT-2): the residual stream's variance
// then stays about constant over 2·layers additions.
double residualStd(const GptConfig& cfg) { return kInitStd / std::sqrt(2.0 * static_cast<double>(cfg.layers)); }

torch::nn::LayerNorm layerNorm(int64_t d) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}));  // weight 1, bias 0
}

torch::nn::Embedding embedding(int64_t rows, int64_t d) {
  torch::nn::Embedding e(torch::nn::EmbeddingOptions(rows, d));
  torch::NoGradGuard noGrad;
  torch::nn::init::normal_(e->weight, 0.0, kInitStd);
  return e;
}

}  // namespace

std::string GptConfig::invalidReason() const {
  auto str = [](int64_t v) { return std::to_string(v); };
  if (vocab < 2) return "vocab " + str(vocab) + " must be at least 2";
  if (seqLen < 1) return "--seq-len " + str(seqLen) + " must be at least 1";
  if (dModel < 1) return "--d-model " + str(dModel) + " must be at least 1";
  if (heads < 1) return "--heads " + str(heads) + " must be at least 1";
  if (dModel % heads != 0)
    return "--d-model " + str(dModel) + " is not a multiple of --heads " + str(heads) + " (each head gets d_model/heads)";
  if (layers < 1) return "--layers " + str(layers) + " must be at least 1";
  if (!(dropout >= 0 && dropout < 1)) return "--dropout " + std::to_string(dropout) + " must be in [0, 1)";
  return "";
}

int64_t GptConfig::numParameters() const {
  const int64_t d = dModel;
  const int64_t perBlock = 12 * d * d + 13 * d;  // qkv, proj, fc, proj (+ biases), two LayerNorms
  return vocab * d + seqLen * d + layers * perBlock + 2 * d;
}

EmbeddingsImpl::EmbeddingsImpl(const GptConfig& cfg) {
  token = register_module("token", embedding(cfg.vocab, cfg.dModel));
  position = register_module("position", embedding(cfg.seqLen, cfg.dModel));
  dropout = register_module("dropout", torch::nn::Dropout(cfg.dropout));
}

torch::Tensor EmbeddingsImpl::forward(const torch::Tensor& tokens) {
  const torch::Tensor positions = torch::arange(tokens.size(1), torch::kInt64);
  return dropout(token(tokens) + position(positions));
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const GptConfig& cfg) : heads_(cfg.heads) {
  qkv = register_module("qkv", linear(cfg.dModel, 3 * cfg.dModel, kInitStd));
  proj = register_module("proj", linear(cfg.dModel, cfg.dModel, residualStd(cfg)));
  attnDropout = register_module("attn_dropout", torch::nn::Dropout(cfg.dropout));
  residDropout = register_module("resid_dropout", torch::nn::Dropout(cfg.dropout));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t batch = x.size(0), time = x.size(1), d = x.size(2), headDim = d / heads_;
  const std::vector<torch::Tensor> parts = qkv(x).split(d, /*dim=*/2);
  // [B, T, d] -> [B, heads, T, head_dim]
  auto perHead = [&](const torch::Tensor& t) { return t.view({batch, time, heads_, headDim}).transpose(1, 2); };
  const torch::Tensor q = perHead(parts[0]), k = perHead(parts[1]), v = perHead(parts[2]);
  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(headDim)));
  // Position t attends to positions <= t only: everything above the diagonal is masked.
  const torch::Tensor future = torch::ones({time, time}, torch::kBool).triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
  const torch::Tensor weights = attnDropout(torch::softmax(scores, /*dim=*/-1));
  const torch::Tensor y = torch::matmul(weights, v).transpose(1, 2).contiguous().view({batch, time, d});
  return residDropout(proj(y));
}

MlpImpl::MlpImpl(const GptConfig& cfg) {
  fc = register_module("fc", linear(cfg.dModel, 4 * cfg.dModel, kInitStd));
  proj = register_module("proj", linear(4 * cfg.dModel, cfg.dModel, residualStd(cfg)));
  dropout = register_module("dropout", torch::nn::Dropout(cfg.dropout));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  return dropout(proj(torch::nn::functional::gelu(fc(x))));
}

BlockImpl::BlockImpl(const GptConfig& cfg) {
  ln1 = register_module("ln1", layerNorm(cfg.dModel));
  attn = register_module("attn", CausalSelfAttention(cfg));
  ln2 = register_module("ln2", layerNorm(cfg.dModel));
  mlp = register_module("mlp", Mlp(cfg));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x) {
  const torch::Tensor h = x + attn(ln1(x));
  return h + mlp(ln2(h));
}

FinalNormImpl::FinalNormImpl(const GptConfig& cfg) { ln = register_module("ln", layerNorm(cfg.dModel)); }

torch::Tensor FinalNormImpl::forward(const torch::Tensor& x) { return ln(x); }

LmHeadImpl::LmHeadImpl(const GptConfig& cfg, torch::Tensor tiedWeight) {
  if (!tiedWeight.defined()) {
    tiedWeight = torch::empty({cfg.vocab, cfg.dModel});
    torch::NoGradGuard noGrad;
    torch::nn::init::normal_(tiedWeight, 0.0, kInitStd);
  }
  weight = register_parameter("weight", tiedWeight);
}

torch::Tensor LmHeadImpl::forward(const torch::Tensor& x) { return torch::nn::functional::linear(x, weight); }

}  // namespace lm
