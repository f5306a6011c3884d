// Typed access to config.json keys. Every failure is an mkserve::Error that names the key and
// quotes the offending value, so a bad config reads as "key = value: why".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mkserve::detail {

// `"key" = <value>: <why>` with the value dumped as JSON (shortened when long).
std::string DescribeKey(const std::string& key, const nlohmann::json& value,
                        const std::string& why);
[[noreturn]] void ThrowKeyError(const std::string& key, const nlohmann::json& value,
                                const std::string& why);

class ConfigReader {
 public:
  explicit ConfigReader(const nlohmann::json& json) : json_(json) {}

  // Present and not null. HF treats null like "use the default" for the Optional keys.
  bool Has(const std::string& key) const;
  const nlohmann::json& Raw(const std::string& key) const { return json_.at(key); }

  // `fallback` when absent; null is an error (these keys are not Optional in the HF class).
  int64_t Int(const std::string& key, int64_t fallback) const;
  int64_t PositiveInt(const std::string& key, int64_t fallback) const;
  double Number(const std::string& key, double fallback) const;
  bool Bool(const std::string& key, bool fallback) const;
  std::string String(const std::string& key, const std::string& fallback) const;

  // nullopt when absent or null (the Optional keys of the HF class).
  std::optional<int64_t> OptionalInt(const std::string& key) const;
  std::optional<double> OptionalNumber(const std::string& key) const;
  std::optional<bool> OptionalBool(const std::string& key) const;
  // A list of strings; nullopt when absent or null.
  std::optional<std::vector<std::string>> OptionalStringList(const std::string& key) const;
  // An int, a list of ints, or absent/null (empty).
  std::vector<int64_t> IntOrIntList(const std::string& key) const;

 private:
  const nlohmann::json& json_;
};

// Reads an integer JSON value; throws naming `key` otherwise.
int64_t JsonToInt(const std::string& key, const nlohmann::json& value);

}  // namespace mkserve::detail
