// What every end-to-end run's profiler output must hold, whatever the parallelism: a system
// metrics file and the end marker, a trace file per rank, and traces that Perfetto accepts
// (strict nesting per (pid, tid) included). Header-only: the e2e programs are torch-linked.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "profiler/timeline_reader.h"
#include "profiler/trace_check.h"  // tests/profiler
#include "testing/e2e_checker.h"

namespace strata::testing {

inline void checkProfilerFiles(const profiler::TimelineReader& reader, const std::string& root, int worldSize,
                               Checker& c) {
  namespace fs = std::filesystem;
  bool systemFile = false;
  for (const auto& e : fs::recursive_directory_iterator(root + "/system"))
    systemFile = systemFile || (e.path().filename().string().find(".algo-1.json") != std::string::npos);
  c.expect(systemFile, "a system metrics file algo-1");
  c.expect(fs::exists(root + "/system/training_job_end.ts"), "profiler end marker");
  c.expect(reader.files().size() >= static_cast<size_t>(worldSize), "a trace file per rank");
  for (const auto& f : reader.files()) {
    std::ifstream in(f.path);
    std::stringstream text;
    text << in.rdbuf();
    for (const auto& p : profiler::testing::perfettoProblems(nlohmann::json::parse(text.str())))
      c.expect(false, f.path + ": " + p);
  }
}

}  // namespace strata::testing
