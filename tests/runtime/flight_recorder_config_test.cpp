// The "flight_recorder" section and its environment overrides (runtime::flightSettings).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "config/config.h"
#include "core/errors.h"
#include "runtime/flight.h"
#include "testing/config_error.h"

namespace strata::config {
namespace {

// Sets an environment variable for one test, and restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

std::string errorOf(const std::string& json) {
  return strata::testing::configErrorOf([&] { parseJobConfig(json, "job.json"); });
}

// The ConfigError's text when the environment variable `name` is `value` ("" when it is accepted).
std::string envErrorOf(const JobConfig& c, const char* name, const char* value) {
  ScopedEnv env(name, value);
  try {
    runtime::flightSettings(c);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(FlightRecorderConfig, DefaultsAndValues) {
  const JobConfig d = defaultJobConfig();
  EXPECT_EQ(d.flightRecorder.entries, 2000);
  EXPECT_FALSE(d.flightRecorder.dumpOnFinalize);
  EXPECT_EQ(d.flightRecorder.clock, "ticker");
  EXPECT_EQ(runtime::flightSettings(d).clock, collectives::flight::Clock::kTicker);
  EXPECT_EQ(parseJobConfig(R"({"flight_recorder": {"clock": "coarse"}})", "j").flightRecorder.clock, "coarse");
  const JobConfig c = parseJobConfig(
      R"({"flight_recorder": {"entries": 0, "dump_on_finalize": true, "clock": "precise", "tick_ms": 4}})", "j");
  EXPECT_EQ(c.flightRecorder.entries, 0);
  EXPECT_TRUE(c.flightRecorder.dumpOnFinalize);
  EXPECT_EQ(c.flightRecorder.clock, "precise");
  EXPECT_EQ(c.flightRecorder.tickMs, 4);
  EXPECT_EQ(d.flightRecorder.tickMs, 50);
  const nlohmann::json j = toJson(c);
  EXPECT_EQ(j["flight_recorder"],
            (nlohmann::json{{"entries", 0}, {"dump_on_finalize", true}, {"clock", "precise"}, {"tick_ms", 4}}));
  EXPECT_EQ(toJson(parseJobConfig(j.dump(), "again")), j);
}

TEST(FlightRecorderConfig, BadValuesNameTheField) {
  EXPECT_NE(errorOf(R"({"flight_recorder": {"entries": -1}})").find("/flight_recorder/entries"), std::string::npos);
  EXPECT_NE(errorOf(R"({"flight_recorder": {"entries": 2000000}})").find("2000000"), std::string::npos);
  EXPECT_NE(errorOf(R"({"flight_recorder": {"entries": "many"}})").find("\"many\""), std::string::npos);
  EXPECT_NE(errorOf(R"({"flight_recorder": {"dump_on_finalise": true}})").find("did you mean \"dump_on_finalize\"?"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"flight_recorder": {"clock": "tsc"}})").find("\"coarse\""), std::string::npos);
  EXPECT_NE(errorOf(R"({"flight_recorder": {"tick_ms": 0}})").find("/flight_recorder/tick_ms"), std::string::npos);
  EXPECT_NE(errorOf(R"({"flight_recorder": {"tick_ms": 5000}})").find("5000"), std::string::npos);
}

TEST(FlightRecorderConfig, EnvironmentWinsAndIsChecked) {
  const JobConfig c = parseJobConfig(R"({"output_dir": "out", "flight_recorder": {"entries": 10}})", "j");
  {
    ScopedEnv entries("STRATA_FLIGHT_ENTRIES", "64");
    ScopedEnv finalize("STRATA_FLIGHT_DUMP_ON_FINALIZE", "1");
    ScopedEnv clock("STRATA_FLIGHT_CLOCK", "precise");
    ScopedEnv tick("STRATA_FLIGHT_TICK_MS", "25");
    const runtime::FlightSettings s = runtime::flightSettings(c);
    EXPECT_EQ(s.entries, 64);
    EXPECT_TRUE(s.dumpOnFinalize);
    EXPECT_EQ(s.clock, collectives::flight::Clock::kPrecise);
    EXPECT_EQ(s.tickPeriod, std::chrono::milliseconds(25));
    EXPECT_EQ(s.dir, "out/flight");
  }
  EXPECT_EQ(runtime::flightSettings(c).entries, 10);
  EXPECT_EQ(runtime::flightSettings(c).tickPeriod, std::chrono::milliseconds(50));
  for (const auto& [name, clock] : {std::pair{"ticker", collectives::flight::Clock::kTicker},
                                    std::pair{"coarse", collectives::flight::Clock::kCoarse},
                                    std::pair{"precise", collectives::flight::Clock::kPrecise}}) {
    ScopedEnv env("STRATA_FLIGHT_CLOCK", name);
    EXPECT_EQ(runtime::flightSettings(c).clock, clock) << name;
  }
  const std::string badClock = envErrorOf(c, "STRATA_FLIGHT_CLOCK", "tsc");
  EXPECT_NE(badClock.find("STRATA_FLIGHT_CLOCK"), std::string::npos) << badClock;
  EXPECT_NE(badClock.find("ticker"), std::string::npos) << badClock;
  EXPECT_NE(envErrorOf(c, "STRATA_FLIGHT_TICK_MS", "0").find("STRATA_FLIGHT_TICK_MS"), std::string::npos);
  EXPECT_NE(envErrorOf(c, "STRATA_FLIGHT_ENTRIES", "-5").find("STRATA_FLIGHT_ENTRIES"), std::string::npos);
}

TEST(FlightRecorderConfig, ZeroEntriesMeansNoRecorder) {
  runtime::FlightSettings s;
  s.entries = 0;
  EXPECT_EQ(runtime::createFlightRecorder(s), nullptr);
  s.entries = 5;
  ASSERT_NE(runtime::createFlightRecorder(s), nullptr);
  EXPECT_EQ(runtime::createFlightRecorder(s)->capacity(), 5u);
}

}  // namespace
}  // namespace strata::config
