#include "collectives/bucket_assignment.h"

#include <map>

namespace strata::collectives {

std::vector<int> reverseOrder(size_t numParams) {
  std::vector<int> order;
  for (size_t i = numParams; i-- > 0;) order.push_back(static_cast<int>(i));
  return order;
}

std::vector<Bucket> assignBuckets(const std::vector<ParamInfo>& params, const std::vector<int>& order,
                                  size_t firstCapBytes, size_t capBytes) {
  const std::vector<int> sequence = order.empty() ? reverseOrder(params.size()) : order;
  std::vector<Bucket> buckets;
  std::vector<bool> firstOfDtype;  // per bucket: the first bucket of its dtype has the small cap
  std::map<DType, size_t> open;    // one open bucket per dtype: other dtypes do not close it
  for (int index : sequence) {
    const ParamInfo& p = params[static_cast<size_t>(index)];
    auto it = open.find(p.dtype);
    if (it != open.end()) {
      const Bucket& b = buckets[it->second];
      const size_t cap = firstOfDtype[it->second] ? firstCapBytes : capBytes;
      if (!b.params.empty() && b.numBytes + p.numBytes > cap) {
        open.erase(it);
        it = open.end();
      }
    }
    if (it == open.end()) {
      bool first = true;
      for (const Bucket& b : buckets) first = first && b.dtype != p.dtype;
      buckets.push_back(Bucket{{}, 0, p.dtype});
      firstOfDtype.push_back(first);
      it = open.emplace(p.dtype, buckets.size() - 1).first;
    }
    Bucket& b = buckets[it->second];
    b.params.push_back(index);
    b.numBytes += p.numBytes;
  }
  return buckets;
}

}  // namespace strata::collectives
