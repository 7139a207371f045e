// A torch::nn::Sequential that can sit inside another Sequential, for a model's blocks:
//
//   strata::NestedSequential blocks;
//   for (int i = 0; i < n; ++i) blocks->push_back(std::to_string(i), Block(cfg));
//   torch::nn::Sequential net;
//   net->push_back("embed", embed);
//   net->push_back("blocks", torch::nn::AnyModule(blocks.ptr()));   // layers "blocks.0", ...
//   net->push_back("head", head);
//
// libtorch cannot hold a plain Sequential in a Sequential (its forward is a template, and
// AnyModule needs a plain one); this one's forward takes and returns one tensor. Model
// parallelism cuts a nested Sequential at its items ("blocks.3"), whatever the depth.
#pragma once

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>

#include <utility>

namespace strata {

class NestedSequentialImpl : public torch::nn::SequentialImpl {
 public:
  using SequentialImpl::SequentialImpl;
  torch::Tensor forward(torch::Tensor x) { return SequentialImpl::forward<torch::Tensor>(std::move(x)); }
};
TORCH_MODULE(NestedSequential);

}  // namespace strata
