// Internal: one parser per section of the job config. Each takes the section's JSON value
// and its JSON pointer, checks it completely (keys, types, ranges, checks within the
// section) and returns the section with defaults filled in. Cross-section checks live in
// config.cpp. All throw ConfigError through the Validator.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "config/json_schema.h"

namespace strata::config::detail {

ModelParallelConfig parseModelParallel(const Validator& v, const Json& section,
                                       const std::string& path);
DataParallelConfig parseDataParallel(const Validator& v, const Json& section,
                                     const std::string& path);
DebuggerConfig parseDebugger(const Validator& v, const Json& section, const std::string& path);
ProfilerConfig parseProfiler(const Validator& v, const Json& section, const std::string& path);
std::vector<RuleConfig> parseRules(const Validator& v, const Json& section,
                                   const std::string& path);
CheckpointConfig parseCheckpoint(const Validator& v, const Json& section, const std::string& path);
CollectivesConfig parseCollectives(const Validator& v, const Json& section,
                                   const std::string& path);
LoggingConfig parseLogging(const Validator& v, const Json& section, const std::string& path);
SecurityConfig parseSecurity(const Validator& v, const Json& section, const std::string& path);
FlightRecorderConfig parseFlightRecorder(const Validator& v, const Json& section, const std::string& path);
MemoryConfig parseMemory(const Validator& v, const Json& section, const std::string& path);

// Section serialisers for toJson, in the file's key names.
Json debuggerToJson(const DebuggerConfig& debugger);
Json rulesToJson(const std::vector<RuleConfig>& rules);
Json securityToJson(const SecurityConfig& security);

}  // namespace strata::config::detail
