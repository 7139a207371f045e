// `strata flight`'s output: the analysis of a run's flight recorder dumps as text for
// people and as JSON for machines (--json). Pure.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>

#include "cli/flight/analysis.h"

namespace strata::cli::flight {

// Dumps that exist but could not be read: rank -> why.
using UnreadableDumps = std::map<int, std::string>;

// Lines: the dumps read, then "OK: ..." or "PROBLEM: <the verdict>", who is behind, and
// the other findings.
std::string formatAnalysis(const Analysis& analysis, const std::map<int, RankDump>& dumps,
                           const UnreadableDumps& unreadable);

// {"ok", "world_size", "dumped", "missing", "unreadable", "verdict", "findings", "behind", "dumps"}.
nlohmann::ordered_json analysisToJson(const Analysis& analysis, const std::map<int, RankDump>& dumps,
                                      const UnreadableDumps& unreadable);

}  // namespace strata::cli::flight
