// Small checked accessors for tokenizer.json: each failure names the component and the field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace mkserve::tokenizer {

inline std::string RequireType(const nlohmann::json& json, const std::string& what) {
  if (!json.is_object() || !json.contains("type") || !json["type"].is_string()) {
    throw Error(what + " must be an object with a string \"type\", got " +
                json.dump().substr(0, 200));
  }
  return json["type"].get<std::string>();
}

inline std::string RequireString(const nlohmann::json& json, const std::string& field,
                                 const std::string& what) {
  if (!json.contains(field) || !json[field].is_string()) {
    throw Error(what + ": field \"" + field + "\" must be a string");
  }
  return json[field].get<std::string>();
}

inline const nlohmann::json& RequireArray(const nlohmann::json& json, const std::string& field,
                                          const std::string& what) {
  if (!json.contains(field) || !json[field].is_array()) {
    throw Error(what + ": field \"" + field + "\" must be an array");
  }
  return json[field];
}

// A boolean field with a default; a present field of another type is an error.
inline bool OptionalBool(const nlohmann::json& json, const std::string& field, bool fallback,
                         const std::string& what) {
  if (!json.contains(field) || json[field].is_null()) return fallback;
  if (!json[field].is_boolean()) throw Error(what + ": field \"" + field + "\" must be a boolean");
  return json[field].get<bool>();
}

// A count with a default (how many characters to strip, ...): a non-negative integer. A float or
// a negative number would convert to size_t as a different number (1e104 is undefined).
inline size_t OptionalCount(const nlohmann::json& json, const std::string& field, size_t fallback,
                            const std::string& what) {
  if (!json.contains(field) || json[field].is_null()) return fallback;
  const nlohmann::json& value = json[field];
  if (!value.is_number_integer() || (!value.is_number_unsigned() && value.get<int64_t>() < 0)) {
    throw Error(what + ": field \"" + field + "\" must be a non-negative integer, got " +
                value.dump().substr(0, 200));
  }
  return value.get<size_t>();
}

// Token ids index tables as large as the vocabulary: one far past any real vocabulary would
// allocate for every id below it.
inline constexpr int64_t kMaxTokenIds = int64_t{1} << 24;

inline int32_t RequireTokenId(const nlohmann::json& value, const std::string& what) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
      value.get<int64_t>() >= kMaxTokenIds) {
    throw Error(what + ": " + value.dump().substr(0, 200) + " is not a token id (0..2^24)");
  }
  return static_cast<int32_t>(value.get<int64_t>());
}

}  // namespace mkserve::tokenizer
