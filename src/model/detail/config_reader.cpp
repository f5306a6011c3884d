#include "model/detail/config_reader.h"

#include <limits>

#include "common/error.h"

namespace mkserve::detail {
namespace {

constexpr size_t kMaxQuotedValueChars = 120;  // keeps an error about a huge list readable

}  // namespace

std::string DescribeKey(const std::string& key, const nlohmann::json& value,
                        const std::string& why) {
  std::string dumped = value.dump();
  if (dumped.size() > kMaxQuotedValueChars) {
    dumped = dumped.substr(0, kMaxQuotedValueChars) + "...";
  }
  return "config key \"" + key + "\" = " + dumped + ": " + why;
}

void ThrowKeyError(const std::string& key, const nlohmann::json& value, const std::string& why) {
  throw Error(DescribeKey(key, value, why));
}

int64_t JsonToInt(const std::string& key, const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    if (value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      ThrowKeyError(key, value, "integer out of range");
    }
    return static_cast<int64_t>(value.get<uint64_t>());
  }
  if (!value.is_number_integer()) ThrowKeyError(key, value, "must be an integer");
  return value.get<int64_t>();
}

bool ConfigReader::Has(const std::string& key) const {
  auto it = json_.find(key);
  return it != json_.end() && !it->is_null();
}

int64_t ConfigReader::Int(const std::string& key, int64_t fallback) const {
  auto it = json_.find(key);
  if (it == json_.end()) return fallback;
  return JsonToInt(key, *it);
}

int64_t ConfigReader::PositiveInt(const std::string& key, int64_t fallback) const {
  int64_t value = Int(key, fallback);
  if (value <= 0) ThrowKeyError(key, value, "must be a positive integer");
  return value;
}

double ConfigReader::Number(const std::string& key, double fallback) const {
  auto it = json_.find(key);
  if (it == json_.end()) return fallback;
  if (!it->is_number()) ThrowKeyError(key, *it, "must be a number");
  return it->get<double>();
}

bool ConfigReader::Bool(const std::string& key, bool fallback) const {
  auto it = json_.find(key);
  if (it == json_.end()) return fallback;
  if (!it->is_boolean()) ThrowKeyError(key, *it, "must be true or false");
  return it->get<bool>();
}

std::string ConfigReader::String(const std::string& key, const std::string& fallback) const {
  auto it = json_.find(key);
  if (it == json_.end()) return fallback;
  if (!it->is_string()) ThrowKeyError(key, *it, "must be a string");
  return it->get<std::string>();
}

std::optional<int64_t> ConfigReader::OptionalInt(const std::string& key) const {
  if (!Has(key)) return std::nullopt;
  return JsonToInt(key, json_.at(key));
}

std::optional<double> ConfigReader::OptionalNumber(const std::string& key) const {
  if (!Has(key)) return std::nullopt;
  return Number(key, 0.0);
}

std::optional<bool> ConfigReader::OptionalBool(const std::string& key) const {
  if (!Has(key)) return std::nullopt;
  return Bool(key, false);
}

std::optional<std::vector<std::string>> ConfigReader::OptionalStringList(
    const std::string& key) const {
  if (!Has(key)) return std::nullopt;
  const nlohmann::json& value = json_.at(key);
  if (!value.is_array()) ThrowKeyError(key, value, "must be a list of strings");
  std::vector<std::string> items;
  for (const nlohmann::json& item : value) {
    if (!item.is_string()) ThrowKeyError(key, value, "must be a list of strings");
    items.push_back(item.get<std::string>());
  }
  return items;
}

std::vector<int64_t> ConfigReader::IntOrIntList(const std::string& key) const {
  if (!Has(key)) return {};
  const nlohmann::json& value = json_.at(key);
  if (!value.is_array()) return {JsonToInt(key, value)};
  std::vector<int64_t> items;
  for (const nlohmann::json& item : value) {
    if (!item.is_number_integer())
      ThrowKeyError(key, value, "must be an integer or a list of them");
    items.push_back(JsonToInt(key, item));
  }
  return items;
}

}  // namespace mkserve::detail
