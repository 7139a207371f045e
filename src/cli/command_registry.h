// The `strata` command line tool's subcommands register themselves here: each
// src/cli/<name>_command.cpp defines a static CommandRegistrar, so adding a command
// touches no shared file.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace strata::cli {

// Adds the subcommand to `app`; the callback it installs runs the command and returns
// the process exit code through `exitCode`.
using CommandSetup = std::function<void(CLI::App& app, int& exitCode)>;

struct CommandRegistrar {
  CommandRegistrar(std::string name, CommandSetup setup);
};

// For a callback: exitCode = run(), or 1 after an error, printed as "strata <command>: <what>".
inline void runReportingErrors(const char* command, int& exitCode, const std::function<int()>& run) {
  try {
    exitCode = run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata %s: %s\n", command, e.what());
    exitCode = 1;
  }
}

// Registered commands in name order.
std::vector<std::pair<std::string, CommandSetup>>& registeredCommands();

}  // namespace strata::cli
