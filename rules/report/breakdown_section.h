// The report's "Where the time went" section: per-rank temporal breakdown (stacked bars),
// communication/computation overlap, compute per step per rank, and the straggler or slow
// stage with its evidence. Rendered from profiler::toJson(Breakdown) (profiler/breakdown.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace strata::rules::report {

// Pure: the <section id="breakdown"> markup (a note when `breakdown` is null or has no ranks).
std::string renderBreakdownSection(const nlohmann::json& breakdown);

// The colours of the five time classes, in order (compute, exposed comm, pipeline wait,
// data loading, idle): the report's palette, so a test can find them in a screenshot.
const char* breakdownColor(int timeClass);

}  // namespace strata::rules::report
