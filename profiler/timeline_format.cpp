#include "profiler/timeline_format.h"

#include "profiler/json_util.h"

namespace strata::profiler {
namespace {

void metadata(std::string& out, const char* name, int pid, const std::string& argsJson,
              int tid = -1) {
  out += "{\"name\":\"";
  out += name;
  out += "\",\"ph\":\"M\",\"pid\":";
  out += std::to_string(pid);
  if (tid >= 0) {
    out += ",\"tid\":";
    out += std::to_string(tid);
  }
  out += ",\"args\":";
  out += argsJson;
  out += "},\n";
}

}  // namespace

TimelineFormatter::TimelineFormatter(int64_t baseUs, std::string processLabel, int64_t osPid)
    : baseUs_(baseUs), processLabel_(std::move(processLabel)), osPid_(osPid) {}

void TimelineFormatter::beginFile() {
  fileStarted_ = false;
  declaredPids_.clear();
  declaredThreads_.clear();
}

int TimelineFormatter::phasePid(const std::string& phase) {
  const auto it = phasePids_.find(phase);
  if (it != phasePids_.end()) return it->second;
  const int pid = static_cast<int>(phasePids_.size()) + 1;  // pid 0 carries T0
  phasePids_.emplace(phase, pid);
  return pid;
}

void TimelineFormatter::append(const TimelineEvent& e, std::string& out) {
  if (!fileStarted_) {
    metadata(out, "process_name", 0,
             "{\"name\":" + jsonQuote(processLabel_) +
                 ",\"start_time_since_epoch_in_micros\":" + std::to_string(baseUs_) + "}");
    metadata(out, "process_sort_index", 0, "{\"sort_index\":0}");
    fileStarted_ = true;
  }
  const int pid = phasePid(e.phase);
  if (declaredPids_.insert(pid).second) {
    metadata(out, "process_name", pid, "{\"name\":" + jsonQuote(e.phase) + "}");
    metadata(out, "process_sort_index", pid, "{\"sort_index\":" + std::to_string(pid) + "}");
  }
  if (declaredThreads_.emplace(pid, e.tid).second) {
    metadata(out, "thread_sort_index", pid, "{\"sort_index\":" + std::to_string(e.tid) + "}",
             e.tid);
    metadata(out, "thread_name", pid, "{\"name\":" + jsonQuote(trackName(e.tid)) + "}", e.tid);
  }
  out += "{\"name\":";
  out += jsonQuote(e.name);
  out += ",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(e.tid);
  out += ",\"ph\":\"X\",\"ts\":" + std::to_string(e.startUs - baseUs_);
  out += ",\"dur\":" + std::to_string(e.durUs < 0 ? 0 : e.durUs);
  out += ",\"args\":{\"pid\":" + std::to_string(osPid_);
  if (e.step >= 0) out += ",\"step_num\":\"" + std::to_string(e.step) + "\"";
  for (const Arg& a : e.args) {
    out += ",";
    out += jsonQuote(a.key);
    out += ":";
    out += a.json;
  }
  out += "}},\n";
}

}  // namespace strata::profiler
