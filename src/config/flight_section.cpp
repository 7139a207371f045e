// The "flight_recorder" section (docs/config.md, docs/flight_recorder.md).
#include "config/sections.h"

namespace strata::config::detail {

FlightRecorderConfig parseFlightRecorder(const Validator& v, const Json& section, const std::string& path) {
  FlightRecorderConfig fc;
  const ObjectReader r(v, section, path, {"entries", "dump_on_finalize", "clock", "tick_ms"});
  r.read("entries", fc.entries, 0, kMaxFlightRecorderEntries);
  r.read("dump_on_finalize", fc.dumpOnFinalize);
  r.readEnum("clock", fc.clock, {"ticker", "coarse", "precise"});
  r.read("tick_ms", fc.tickMs, kMinFlightTickMs, kMaxFlightTickMs);
  return fc;
}

}  // namespace strata::config::detail
