// Half-open time intervals [startUs, endUs) and the set operations the timeline analyses need
// (union, intersection, difference, total length). Pure functions on sorted, disjoint lists.
#pragma once

#include <cstdint>
#include <vector>

namespace strata::profiler {

struct Interval {
  int64_t startUs = 0;
  int64_t endUs = 0;  // > startUs for a non-empty interval
};

// Sorted, disjoint, non-empty intervals.
using IntervalSet = std::vector<Interval>;

// The union of any intervals (empty ones dropped).
IntervalSet unite(std::vector<Interval> intervals);
IntervalSet unite(const IntervalSet& a, const IntervalSet& b);
IntervalSet intersect(const IntervalSet& a, const IntervalSet& b);
// a minus b.
IntervalSet subtract(const IntervalSet& a, const IntervalSet& b);
int64_t lengthUs(const IntervalSet& set);
// The part of `set` inside [startUs, endUs).
IntervalSet clip(const IntervalSet& set, int64_t startUs, int64_t endUs);

}  // namespace strata::profiler
