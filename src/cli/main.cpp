// strata: inspect and analyse runs (trial, trace, rules, report, simulate, ...).
#include <algorithm>
#include <cstdio>
#include <exception>

#include "cli/command_registry.h"
#include "core/build_config.h"

namespace strata::cli {

std::vector<std::pair<std::string, CommandSetup>>& registeredCommands() {
  static std::vector<std::pair<std::string, CommandSetup>> commands;
  return commands;
}

CommandRegistrar::CommandRegistrar(std::string name, CommandSetup setup) {
  auto& commands = registeredCommands();
  commands.emplace_back(std::move(name), std::move(setup));
  std::sort(commands.begin(), commands.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
}

}  // namespace strata::cli

int main(int argc, char** argv) {
  CLI::App app{"strata: inspect and analyse Strata training runs"};
  app.set_version_flag("--version", STRATA_VERSION_STRING);
  app.require_subcommand(1);
  int exitCode = 0;
  for (auto& [name, setup] : strata::cli::registeredCommands()) setup(app, exitCode);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata: %s\n", e.what());
    return 1;
  }
  return exitCode;
}
