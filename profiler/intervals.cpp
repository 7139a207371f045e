#include "profiler/intervals.h"

#include <algorithm>

namespace strata::profiler {

IntervalSet unite(std::vector<Interval> intervals) {
  intervals.erase(std::remove_if(intervals.begin(), intervals.end(),
                                 [](const Interval& i) { return i.endUs <= i.startUs; }),
                  intervals.end());
  std::sort(intervals.begin(), intervals.end(),
            [](const Interval& a, const Interval& b) { return a.startUs < b.startUs; });
  IntervalSet out;
  for (const Interval& i : intervals) {
    if (!out.empty() && i.startUs <= out.back().endUs) {
      out.back().endUs = std::max(out.back().endUs, i.endUs);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

IntervalSet unite(const IntervalSet& a, const IntervalSet& b) {
  std::vector<Interval> all(a);
  all.insert(all.end(), b.begin(), b.end());
  return unite(std::move(all));
}

IntervalSet intersect(const IntervalSet& a, const IntervalSet& b) {
  IntervalSet out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t start = std::max(a[i].startUs, b[j].startUs);
    const int64_t end = std::min(a[i].endUs, b[j].endUs);
    if (start < end) out.push_back({start, end});
    if (a[i].endUs < b[j].endUs) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

IntervalSet subtract(const IntervalSet& a, const IntervalSet& b) {
  IntervalSet out;
  size_t j = 0;
  for (const Interval& x : a) {
    int64_t cursor = x.startUs;
    while (j < b.size() && b[j].endUs <= cursor) ++j;
    size_t k = j;
    while (k < b.size() && b[k].startUs < x.endUs) {
      if (b[k].startUs > cursor) out.push_back({cursor, b[k].startUs});
      cursor = std::max(cursor, b[k].endUs);
      ++k;
    }
    if (cursor < x.endUs) out.push_back({cursor, x.endUs});
  }
  return out;
}

int64_t lengthUs(const IntervalSet& set) {
  int64_t total = 0;
  for (const Interval& i : set) total += i.endUs - i.startUs;
  return total;
}

IntervalSet clip(const IntervalSet& set, int64_t startUs, int64_t endUs) {
  return intersect(set, IntervalSet{{startUs, endUs}});
}

}  // namespace strata::profiler
