#include "core/rank_tag.h"

#include <mutex>

namespace strata {
namespace {
std::string& processTag() {
  static std::string tag = "[r?]";
  return tag;
}
thread_local std::string threadTag;
}  // namespace

const std::string& rankTag() {
  return threadTag.empty() ? processTag() : threadTag;
}

void setRankTag(int rank, int worldSize) {
  processTag() = "[r" + std::to_string(rank) + "/" + std::to_string(worldSize) + "]";
}

void setThreadRankTag(int rank, int worldSize) {
  threadTag = "[r" + std::to_string(rank) + "/" + std::to_string(worldSize) + "]";
}

}  // namespace strata
