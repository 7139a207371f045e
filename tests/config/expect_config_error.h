// The check the section-key tests share: parsing `json` must throw a ConfigError whose
// message contains `needle` (a JSON pointer, a suggestion, the list of valid keys).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "config/config.h"
#include "core/errors.h"

namespace strata::config {

inline void expectConfigError(const std::string& json, const std::string& needle) {
  try {
    parseJobConfig(json, "job.json");
    FAIL() << "no error for " << json;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace strata::config
