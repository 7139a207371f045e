// The `strata` command line tool's subcommands register themselves here: each
// src/cli/<name>_command.cpp defines a static CommandRegistrar, so adding a command
// touches no shared file.
#pragma once

#include <CLI/CLI.hpp>

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

// Registered commands in name order.
std::vector<std::pair<std::string, CommandSetup>>& registeredCommands();

}  // namespace strata::cli
