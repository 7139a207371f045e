#include "profiler/timeline_event.h"

#include <pthread.h>

#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include "profiler/json_util.h"

namespace strata::profiler {
namespace {

std::mutex& userTracksMutex() {
  static std::mutex mu;
  return mu;
}
std::map<int, std::string>& userTrackNames() {
  static std::map<int, std::string> names;
  return names;
}

}  // namespace

std::string_view stepPhaseName(Mode mode) {
  switch (mode) {
    case Mode::kTrain: return "Step:ModeKeys.TRAIN";
    case Mode::kEval: return "Step:ModeKeys.EVAL";
    case Mode::kPredict: return "Step:ModeKeys.PREDICT";
    case Mode::kGlobal: return "Step:ModeKeys.GLOBAL";
  }
  return "Step:ModeKeys.GLOBAL";
}

int trackId(Track track) { return static_cast<int>(track); }

std::string trackName(int tid) {
  switch (static_cast<Track>(tid)) {
    case Track::kSteps: return "steps";
    case Track::kCompute: return "compute";
    case Track::kCommunication: return "communication";
    case Track::kDataLoading: return "data loading";
    case Track::kPipeline: return "pipeline";
    case Track::kCheckpoint: return "checkpoint";
  }
  std::lock_guard<std::mutex> lock(userTracksMutex());
  const auto it = userTrackNames().find(tid);
  if (it != userTrackNames().end()) return it->second;
  return "track " + std::to_string(tid);
}

int userTrackOfThisThread() {
  static std::atomic<int> nextOrdinal{0};
  thread_local const int tid = [] {
    const int id = kUserTrackBase + nextOrdinal.fetch_add(1);
    char name[32] = {};
    if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0) name[0] = '\0';
    std::lock_guard<std::mutex> lock(userTracksMutex());
    userTrackNames()[id] = std::string("user: ") + (name[0] ? name : "thread");
    return id;
  }();
  return tid;
}

std::string Arg::renderDouble(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  const auto result = std::to_chars(buf, buf + sizeof(buf), v);  // shortest round trip
  return std::string(buf, result.ptr);
}

Arg::Arg(std::string k, std::string_view v)
    : key(std::move(k)), json(jsonQuote(v)) {}

}  // namespace strata::profiler
