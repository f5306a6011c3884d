// The `mkserve <command>` table. Each command lives in its own cmd_<name>.cpp and registers itself
// with a static CommandRegistration, so adding a command touches no shared file.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

namespace mkserve::cli {

struct Command {
  std::string name;
  std::string summary;  // one line for `mkserve help`
  std::string usage;    // `mkserve NAME --help`: its flags, defaults and what they do
  std::function<int(std::span<const std::string> args)> run;
};

std::vector<Command>& CommandTable();

struct CommandRegistration {
  explicit CommandRegistration(Command command) { CommandTable().push_back(std::move(command)); }
};

}  // namespace mkserve::cli
