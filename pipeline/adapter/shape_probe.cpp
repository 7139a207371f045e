#include "pipeline/adapter/shape_probe.h"

#include <ATen/CPUGeneratorImpl.h>

#include <array>
#include <memory>
#include <mutex>

#include "core/errors.h"

namespace strata::pipeline {
namespace {

constexpr uint64_t kShapeTag = uint64_t{0x53} << 56;  // 'S': shape messages on the pipeline group
constexpr size_t kMaxDims = 14;                        // a message is [dtype, dims, sizes...]
using ShapeMessage = std::array<int64_t, kMaxDims + 2>;

ShapeMessage encode(const TensorShape& s) {
  STRATA_CHECK(s.sizes.size() <= kMaxDims, "pipeline: a layer output of ", s.sizes.size(),
               " dimensions; at most ", kMaxDims, " cross a stage boundary");
  ShapeMessage m{};
  m[0] = static_cast<int64_t>(s.dtype);
  m[1] = static_cast<int64_t>(s.sizes.size());
  for (size_t d = 0; d < s.sizes.size(); ++d) m[d + 2] = s.sizes[d];
  return m;
}

TensorShape decode(const ShapeMessage& m) {
  TensorShape s;
  s.dtype = static_cast<c10::ScalarType>(m[0]);
  s.sizes.assign(m.begin() + 2, m.begin() + 2 + m[1]);
  return s;
}

}  // namespace

std::vector<TensorShape> ShapeProbe::run(const torch::Tensor& input) const {
  std::vector<TensorShape> shapes(layers->size());
  const bool training = model->is_training();
  model->eval();
  struct Restore {
    torch::nn::Module* model;
    bool training;
    ~Restore() { model->train(training); }
  } restore{model, training};
  torch::NoGradGuard noGrad;
  const int stages = static_cast<int>(chunks.size()) * partitions;
  torch::Tensor x;
  std::vector<std::pair<std::shared_ptr<Work>, std::unique_ptr<ShapeMessage>>> sends;
  for (int s = 0; s < stages; ++s) {
    if (s % partitions != rank) continue;
    const ChunkRange& c = chunks.at(static_cast<size_t>(s / partitions));
    const int prev = (s - 1) % partitions;
    if (s == 0) {
      x = input;
    } else if (prev != rank) {
      ShapeMessage m{};
      pipelineGroup->recv(m.data(), sizeof(m), prev, kShapeTag | static_cast<uint64_t>(s));
      shapes[static_cast<size_t>(c.begin - 1)] = decode(m);
      x = torch::zeros(shapes[static_cast<size_t>(c.begin - 1)].sizes,
                       torch::TensorOptions().dtype(shapes[static_cast<size_t>(c.begin - 1)].dtype));
    }  // else: x is this rank's previous chunk's output
    for (int i = c.begin; i < c.end; ++i) {
      x = (*layers)[static_cast<size_t>(i)].module.forward<torch::Tensor>(x);
      checkBatchMajor((*layers)[static_cast<size_t>(i)].name, static_cast<size_t>(i), x, input.size(0));
      shapes[static_cast<size_t>(i)] = {x.sizes().vec(), x.scalar_type()};
    }
    const int next = (s + 1) % partitions;
    if (s + 1 < stages && next != rank) {
      auto m = std::make_unique<ShapeMessage>(encode(shapes[static_cast<size_t>(c.end - 1)]));
      auto work = pipelineGroup->isend(m->data(), sizeof(ShapeMessage), next, kShapeTag | static_cast<uint64_t>(s + 1));
      sends.emplace_back(std::move(work), std::move(m));
    }
  }
  for (auto& send : sends) send.first->wait();
  if (partitions > 1) {  // the last layer's shape everywhere
    ShapeMessage m = encode(shapes.back());
    pipelineGroup->broadcast(m.data(), m.size(), DType::kInt64, (stages - 1) % partitions);
    shapes.back() = decode(m);
  }
  return shapes;
}

}  // namespace strata::pipeline
