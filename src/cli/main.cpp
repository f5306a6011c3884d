#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "common/error.h"

namespace mkserve::cli {

std::vector<Command>& CommandTable() {
  static std::vector<Command> table;
  return table;
}

namespace {

void PrintUsage() {
  std::vector<Command> commands = CommandTable();
  std::sort(commands.begin(), commands.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
  std::fprintf(stderr,
               "usage: mkserve <command> [--flag value ...]   (mkserve <command> --help: its "
               "flags)\n\ncommands:\n");
  for (const Command& command : commands) {
    std::fprintf(stderr, "  %-14s %s\n", command.name.c_str(), command.summary.c_str());
  }
}

}  // namespace
}  // namespace mkserve::cli

int main(int argc, char** argv) {
  using namespace mkserve::cli;
  if (argc < 2 || std::string(argv[1]) == "help" || std::string(argv[1]) == "--help") {
    PrintUsage();
    return argc < 2 ? 2 : 0;
  }
  std::string name = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const Command& command : CommandTable()) {
    if (command.name != name) continue;
    if (std::find(args.begin(), args.end(), "--help") != args.end()) {
      std::fputs(command.usage.c_str(), stdout);
      return std::fflush(stdout) == 0 ? 0 : 1;
    }
    try {
      const int status = command.run(args);
      // Output that never reached its file (a full disk, /dev/full) is a failure, not exit 0.
      std::cout.flush();
      if (std::fflush(stdout) != 0 || std::ferror(stdout) || std::cout.fail()) {
        std::fprintf(stderr, "mkserve %s: error: writing the output failed: %s\n", name.c_str(),
                     std::strerror(errno));
        return 1;
      }
      return status;
    } catch (const mkserve::Error& error) {
      std::fprintf(stderr, "mkserve %s: error: %s\n", name.c_str(), error.what());
      return 1;
    } catch (const std::exception& error) {
      std::fprintf(stderr, "mkserve %s: internal error: %s\n", name.c_str(), error.what());
      return 3;
    }
  }
  std::fprintf(stderr, "mkserve: unknown command '%s'\n\n", name.c_str());
  PrintUsage();
  return 2;
}
