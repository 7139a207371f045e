#include "profiler/step_times.h"

#include <algorithm>
#include <filesystem>

#include "profiler/json_util.h"
#include "profiler/system_monitor.h"

namespace strata::profiler {

std::vector<StepTime> parseStepTimesText(const std::string& text, size_t* badLines) {
  const ParsedObjects parsed = parseJsonLines(text);
  size_t bad = parsed.badLines;
  std::vector<StepTime> out;
  for (const nlohmann::json& o : parsed.objects) {
    try {
      StepTime s;
      s.rank = o.at("rank").get<int>();
      s.nodeId = o.value("node", "");
      s.step = o.at("step").get<int64_t>();
      s.mode = o.value("mode", "TRAIN");
      s.startUs = o.at("start_us").get<int64_t>();
      s.durUs = o.at("dur_us").get<int64_t>();
      out.push_back(std::move(s));
    } catch (const nlohmann::json::exception&) {
      ++bad;
    }
  }
  if (badLines != nullptr) *badLines = bad;
  return out;
}

std::vector<StepTime> readStepTimes(const std::string& profilerRoot) {
  namespace fs = std::filesystem;
  std::vector<StepTime> out;
  std::error_code ec;
  const fs::path dir = fs::path(profilerRoot) / "steps";
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::end(it); it.increment(ec)) {
    if (it->path().extension() != ".jsonl") continue;
    if (const auto text = readTextFile(it->path().string())) {
      auto steps = parseStepTimesText(*text);
      out.insert(out.end(), steps.begin(), steps.end());
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const StepTime& a, const StepTime& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.startUs < b.startUs;
  });
  return out;
}

}  // namespace strata::profiler
