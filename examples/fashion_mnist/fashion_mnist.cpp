#include "fashion_mnist.h"

#include <zlib.h>

#include <stdexcept>
#include <vector>

namespace fashion {
namespace {

// Fashion-MNIST's training-set pixel statistics (after scaling to [0, 1]).
constexpr double kMean = 0.2860;
constexpr double kStd = 0.3530;

std::vector<uint8_t> readGz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path + " (is dataset-fashion-mnist installed?)");
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.insert(out.end(), buf, buf + n);
  const bool failed = n < 0;
  gzclose(f);
  if (failed) throw std::runtime_error("corrupt gzip data in " + path);
  return out;
}

uint32_t bigEndian(const std::vector<uint8_t>& b, size_t at) {
  return uint32_t(b[at]) << 24 | uint32_t(b[at + 1]) << 16 | uint32_t(b[at + 2]) << 8 | uint32_t(b[at + 3]);
}

}  // namespace

FashionMnist::FashionMnist(const std::string& dir, Split split) {
  const std::string prefix = dir + (split == Split::kTrain ? "/train" : "/t10k");
  const auto images = readGz(prefix + "-images-idx3-ubyte.gz");
  const auto labels = readGz(prefix + "-labels-idx1-ubyte.gz");
  if (images.size() < 16 || bigEndian(images, 0) != 2051) throw std::runtime_error("bad IDX image header in " + prefix);
  if (labels.size() < 8 || bigEndian(labels, 0) != 2049) throw std::runtime_error("bad IDX label header in " + prefix);
  const int64_t count = bigEndian(images, 4), rows = bigEndian(images, 8), cols = bigEndian(images, 12);
  if (images.size() != 16 + size_t(count * rows * cols) || labels.size() != 8 + size_t(count))
    throw std::runtime_error("IDX sizes do not match in " + prefix);
  images_ = torch::from_blob(const_cast<uint8_t*>(images.data()) + 16, {count, 1, rows, cols}, torch::kUInt8)
                .to(torch::kFloat32)
                .div_(255.0)
                .sub_(kMean)
                .div_(kStd);
  labels_ = torch::from_blob(const_cast<uint8_t*>(labels.data()) + 8, {count}, torch::kUInt8).to(torch::kInt64);
}

torch::data::Example<> FashionMnist::get(size_t index) {
  return {images_[static_cast<int64_t>(index)], labels_[static_cast<int64_t>(index)]};
}

torch::optional<size_t> FashionMnist::size() const { return static_cast<size_t>(images_.size(0)); }

}  // namespace fashion
