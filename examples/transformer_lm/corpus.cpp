#include "corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "strata/errors.h"

namespace lm {
namespace {

namespace fs = std::filesystem;

constexpr double kValidationFraction = 0.05;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

bool isTextFile(const fs::directory_entry& entry) {
  if (!entry.is_regular_file() || entry.is_symlink()) return false;  // *.u8 are symlinks
  const std::string ext = entry.path().extension().string();
  return ext != ".dat" && ext != ".u8";
}

// Appends one file, turning fortune's "%" separator lines into blank lines.
void appendText(const fs::path& path, std::vector<uint8_t>& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::string line;
  while (std::getline(in, line)) {
    if (line != "%") out.insert(out.end(), line.begin(), line.end());
    out.push_back('\n');
  }
}

}  // namespace

std::vector<uint8_t> readCorpus(const std::string& dir) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (isTextFile(entry)) files.push_back(entry.path());
  if (ec || files.empty())
    throw strata::ConfigError("no text files in " + dir +
                             (ec ? " (" + ec.message() + ")" : "") +
                             "; install Debian's fortunes package (apt-get install fortunes) or pass --data-dir");
  std::sort(files.begin(), files.end());
  std::vector<uint8_t> bytes;
  for (const auto& f : files) appendText(f, bytes);
  return bytes;
}

WindowOrder::WindowOrder(int64_t numBytes, int64_t seqLen, uint64_t seed) : seqLen_(seqLen), seed_(seed) {
  // A window at perm·(T+1) + shift, shift < T+1, must end inside the text.
  windows_ = numBytes / (seqLen + 1) - 1;
  if (windows_ < 2)
    throw strata::ConfigError("the training text (" + std::to_string(numBytes) + " bytes) holds fewer than 2 windows of " +
                              std::to_string(seqLen + 1) + " bytes: lower --seq-len");
}

int64_t WindowOrder::start(int64_t index) {
  const int64_t epoch = index / windows_;
  if (epoch != cachedEpoch_) {
    uint64_t state = splitmix64(seed_ ^ splitmix64(static_cast<uint64_t>(epoch)));
    shift_ = static_cast<int64_t>(state % static_cast<uint64_t>(seqLen_ + 1));
    perm_.resize(static_cast<size_t>(windows_));
    for (int64_t i = 0; i < windows_; ++i) perm_[static_cast<size_t>(i)] = i;
    for (int64_t i = windows_ - 1; i > 0; --i) {  // Fisher-Yates
      state = splitmix64(state);
      std::swap(perm_[static_cast<size_t>(i)], perm_[state % static_cast<uint64_t>(i + 1)]);
    }
    cachedEpoch_ = epoch;
  }
  return perm_[static_cast<size_t>(index % windows_)] * (seqLen_ + 1) + shift_;
}

TextData::TextData(std::vector<uint8_t> bytes, int64_t seqLen, uint64_t seed)
    : bytes_(std::move(bytes)),
      seqLen_(seqLen),
      trainBytes_(static_cast<int64_t>(static_cast<double>(bytes_.size()) * (1 - kValidationFraction))),
      order_(trainBytes_, seqLen, seed) {}

Batch TextData::gather(const std::vector<int64_t>& starts) const {
  const int64_t b = static_cast<int64_t>(starts.size());
  torch::Tensor window = torch::empty({b, seqLen_ + 1}, torch::kUInt8);
  for (int64_t i = 0; i < b; ++i)
    std::copy_n(bytes_.data() + starts[static_cast<size_t>(i)], seqLen_ + 1, window[i].data_ptr<uint8_t>());
  window = window.to(torch::kInt64);
  return {window.narrow(1, 0, seqLen_).contiguous(), window.narrow(1, 1, seqLen_).contiguous()};
}

Batch TextData::trainBatch(int64_t step, int64_t globalBatch, int dpRank, int dpSize) {
  const int64_t local = globalBatch / dpSize;
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < local; ++i) starts.push_back(order_.start(step * globalBatch + dpRank * local + i));
  return gather(starts);
}

int64_t TextData::validationBatches(int64_t globalBatch) const {
  return (validationBytes() - 1) / seqLen_ / globalBatch;
}

Batch TextData::validationBatch(int64_t index, int64_t globalBatch, int dpRank, int dpSize) const {
  const int64_t local = globalBatch / dpSize;
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < local; ++i) starts.push_back(trainBytes_ + (index * globalBatch + dpRank * local + i) * seqLen_);
  return gather(starts);
}

}  // namespace lm
