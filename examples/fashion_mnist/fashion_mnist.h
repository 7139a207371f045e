// Fashion-MNIST read straight from the Debian package's .gz files (IDX format) with zlib.
#pragma once

#include <torch/data/datasets/base.h>
#include <torch/data/example.h>
#include <torch/types.h>

#include <string>

namespace fashion {

// Default location of Debian's dataset-fashion-mnist package.
constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";

class FashionMnist : public torch::data::datasets::Dataset<FashionMnist> {
 public:
  enum class Split { kTrain, kTest };
  // Reads <dir>/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz; images are scaled to
  // [0, 1] and normalised with the training set's mean and std. Throws std::runtime_error
  // naming the file on a missing or malformed file.
  FashionMnist(const std::string& dir, Split split);

  torch::data::Example<> get(size_t index) override;
  torch::optional<size_t> size() const override;
  const torch::Tensor& images() const { return images_; }
  const torch::Tensor& labels() const { return labels_; }

 private:
  torch::Tensor images_;  // [N, 1, 28, 28] float32
  torch::Tensor labels_;  // [N] int64
};

}  // namespace fashion
