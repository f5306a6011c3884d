// Command-line flags of the form `--name value` and `--switch`. Every flag a command reads must be
// declared by reading it; Finish() then rejects anything left over, so a typo is an error.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace mkserve {

class Args {
 public:
  explicit Args(std::span<const std::string> argv);

  // --name value; nullopt when absent. A flag given without a value is an error.
  std::optional<std::string> Value(const std::string& name);
  std::string String(const std::string& name, const std::string& fallback);
  std::string RequiredString(const std::string& name);
  int64_t Int(const std::string& name, int64_t fallback);
  // As Int, and outside [min, max] an error "--name must be min..max, got v": counts are checked
  // here before a caller narrows them (4294967297 as an int is 1).
  int64_t Int(const std::string& name, int64_t fallback, int64_t min, int64_t max);
  double Double(const std::string& name, double fallback);
  // Comma-separated integers, e.g. --batch 1,2,4.
  std::vector<int64_t> IntList(const std::string& name, std::vector<int64_t> fallback);
  // A comma-separated list ("a,b"); an empty item stays an empty string.
  std::vector<std::string> StringList(const std::string& name, std::vector<std::string> fallback);
  // --name with no value.
  bool Switch(const std::string& name);

  // Throws mkserve::Error naming the first flag no getter asked for.
  void Finish() const;

 private:
  struct Flag {
    std::string name;
    std::optional<std::string> value;
    bool used = false;
  };
  Flag* Find(const std::string& name);

  std::vector<Flag> flags_;
};

}  // namespace mkserve
