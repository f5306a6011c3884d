// Typed reads of request JSON. Every getter checks the type and range and throws ApiError
// (400, param named) on a mismatch, so parsers read like a list of fields. A field that is
// absent or null reads as nullopt: OpenAI clients send null for "not set".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "server/json.h"

namespace mkserve::server {

// Parses a request body; malformed JSON or a non-object body is a 400.
Json ParseJsonBody(const std::string& body);

// Throws ApiError(kInvalidRequest) naming `param`.
[[noreturn]] void ThrowInvalid(const std::string& param, const std::string& message);

// Name of the JSON type of `value` for error messages ("a string", "an array").
std::string JsonTypeName(const Json& value);

class JsonFields {
 public:
  // `object` must outlive this reader; `prefix` names it in errors ("messages[2]").
  JsonFields(const Json& object, std::string prefix);

  // The field's value, or nullptr when absent or null.
  const Json* Get(const std::string& name) const;
  // "prefix.name", or "name" at the top level.
  std::string Param(const std::string& name) const;

  std::optional<bool> Bool(const std::string& name) const;
  std::optional<std::string> String(const std::string& name) const;
  // A string that must not be empty when present.
  std::optional<std::string> NonEmptyString(const std::string& name) const;
  std::optional<double> Number(const std::string& name, double min, double max) const;
  std::optional<int64_t> Integer(const std::string& name, int64_t min, int64_t max) const;
  // Present and of JSON type array / object; throws when present with another type.
  const Json* Array(const std::string& name) const;
  const Json* Object(const std::string& name) const;
  // OpenAI's metadata: at most 16 string values, keys of at most 64 bytes, values of 512; an
  // empty object when absent.
  Json Metadata(const std::string& name) const;

 private:
  const Json& object_;
  std::string prefix_;
};

}  // namespace mkserve::server
