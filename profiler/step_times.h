// Reader of the always-on step timer (steps/<node>_steps.jsonl, written by
// StepTimeWriter): every step's duration on every rank, for step-outlier detection even
// when the detailed timeline is off. Tolerates a torn last line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::profiler {

struct StepTime {
  int rank = -1;
  std::string nodeId;  // "3-algo-1"
  int64_t step = 0;
  std::string mode;    // "TRAIN", "EVAL", "PREDICT", "GLOBAL"
  int64_t startUs = 0; // epoch µs
  int64_t durUs = 0;
};

// Parses one file's text. Pure. *badLines counts lines that did not decode.
std::vector<StepTime> parseStepTimesText(const std::string& text, size_t* badLines = nullptr);
// Every rank's step times under <profilerRoot>/steps, sorted by rank, then start.
std::vector<StepTime> readStepTimes(const std::string& profilerRoot);

}  // namespace strata::profiler
