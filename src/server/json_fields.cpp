#include "server/json_fields.h"

#include <cmath>
#include <optional>
#include <sstream>

#include "common/input_json.h"
#include "server/error.h"

namespace mkserve::server {

namespace {

// Request bodies nest at most this deep (common/input_json.h says why). Real requests, tool
// schemas included, stay far below.
constexpr int kMaxJsonDepth = 128;

// Throws JsonTooDeep as soon as a container would open beyond kMaxJsonDepth.
Json ParseBounded(const std::string& body, bool allow_exceptions) {
  return ParseJsonBounded<Json>(body, kMaxJsonDepth, allow_exceptions);
}

// The value of the 4 hex digits at body[at], or -1.
int HexQuad(const std::string& body, size_t at) {
  if (at + 4 > body.size()) return -1;
  int value = 0;
  for (size_t i = at; i < at + 4; ++i) {
    const char c = body[i];
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

// JSON's grammar allows a \u escape of a lone UTF-16 surrogate (a JavaScript client that slices a
// string inside an emoji writes one); the JSON library refuses it. The body with each lone one
// as U+FFFD, as a decoder shows it; nullopt when it has none.
std::optional<std::string> WithoutLoneSurrogates(const std::string& body) {
  std::string out;
  out.reserve(body.size());
  bool in_string = false, changed = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c == '"') in_string = !in_string;
    if (!in_string || c != '\\' || i + 1 >= body.size()) {
      out += c;
      continue;
    }
    const int unit = body[i + 1] == 'u' ? HexQuad(body, i + 2) : -1;
    const bool high = unit >= 0xD800 && unit <= 0xDBFF, low = unit >= 0xDC00 && unit <= 0xDFFF;
    const bool escape_follows = i + 8 <= body.size() && body.compare(i + 6, 2, "\\u") == 0;
    const int next = high && escape_follows ? HexQuad(body, i + 8) : -1;
    if (high && next >= 0xDC00 && next <= 0xDFFF) {  // a pair: kept
      out.append(body, i, 12);
      i += 11;
    } else if (high || low) {
      out += "\\uFFFD";
      i += 5;
      changed = true;
    } else {  // another escape: both characters, so an escaped quote is no string's end
      out.append(body, i, 2);
      ++i;
    }
  }
  if (!changed) return std::nullopt;
  return out;
}

}  // namespace

Json ParseJsonBody(const std::string& body) {
  Json value;
  try {
    value = ParseBounded(body, /*allow_exceptions=*/false);
    if (value.is_discarded()) {
      if (std::optional<std::string> repaired = WithoutLoneSurrogates(body)) {
        value = ParseBounded(*repaired, /*allow_exceptions=*/false);
      }
    }
    if (value.is_discarded()) {
      // Re-parse with exceptions only to get nlohmann's position-bearing message.
      std::string detail = "could not parse the request body";
      try {
        Json unused = ParseBounded(body, /*allow_exceptions=*/true);
        (void)unused;
      } catch (const Json::exception& error) {  // a syntax error, or a number out of range
        detail = error.what();
      }
      throw ApiError(ErrorKind::kInvalidRequest, "malformed JSON in the request body: " + detail);
    }
  } catch (const JsonTooDeep&) {
    throw ApiError(ErrorKind::kInvalidRequest,
                   "the request body nests JSON objects and arrays more than " +
                       std::to_string(kMaxJsonDepth) + " levels deep; flatten it");
  }
  if (!value.is_object()) {
    throw ApiError(ErrorKind::kInvalidRequest,
                   "the request body must be a JSON object, got " + JsonTypeName(value));
  }
  return value;
}

void ThrowInvalid(const std::string& param, const std::string& message) {
  throw ApiError(ErrorKind::kInvalidRequest, "'" + param + "': " + message, param);
}

std::string JsonTypeName(const Json& value) {
  if (value.is_string()) return "a string";
  if (value.is_boolean()) return "a boolean";
  if (value.is_number_integer() || value.is_number_unsigned()) return "an integer";
  if (value.is_number()) return "a number";
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  return "null";
}

JsonFields::JsonFields(const Json& object, std::string prefix)
    : object_(object), prefix_(std::move(prefix)) {
  if (!object_.is_object())
    ThrowInvalid(prefix_, "expected an object, got " + JsonTypeName(object_));
}

const Json* JsonFields::Get(const std::string& name) const {
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string JsonFields::Param(const std::string& name) const {
  return prefix_.empty() ? name : prefix_ + "." + name;
}

std::optional<bool> JsonFields::Bool(const std::string& name) const {
  const Json* value = Get(name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean())
    ThrowInvalid(Param(name), "expected a boolean, got " + JsonTypeName(*value));
  return value->get<bool>();
}

std::optional<std::string> JsonFields::String(const std::string& name) const {
  const Json* value = Get(name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string())
    ThrowInvalid(Param(name), "expected a string, got " + JsonTypeName(*value));
  return value->get<std::string>();
}

std::optional<std::string> JsonFields::NonEmptyString(const std::string& name) const {
  std::optional<std::string> value = String(name);
  if (value && value->empty()) ThrowInvalid(Param(name), "must not be empty");
  return value;
}

namespace {

std::string RangeText(double min, double max) {
  std::ostringstream text;
  text << "must be between " << min << " and " << max;
  return text.str();
}

// Integer bounds in full: "2147483647", not the 6 digits of a double ("2.14748e+09").
std::string RangeText(int64_t min, int64_t max) {
  return "must be between " + std::to_string(min) + " and " + std::to_string(max);
}

}  // namespace

std::optional<double> JsonFields::Number(const std::string& name, double min, double max) const {
  const Json* value = Get(name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number())
    ThrowInvalid(Param(name), "expected a number, got " + JsonTypeName(*value));
  double number = value->get<double>();
  if (!std::isfinite(number) || number < min || number > max) {
    // The value as sent: ostream's six digits showed 2.0000001 as "got 2".
    ThrowInvalid(Param(name), RangeText(min, max) + ", got " + value->dump());
  }
  return number;
}

std::optional<int64_t> JsonFields::Integer(const std::string& name, int64_t min,
                                           int64_t max) const {
  const Json* value = Get(name);
  if (value == nullptr) return std::nullopt;
  // 3.0 is accepted as 3: some clients serialize every number as a double.
  bool integral =
      value->is_number_integer() || value->is_number_unsigned() ||
      (value->is_number_float() && std::floor(value->get<double>()) == value->get<double>());
  if (!integral) ThrowInvalid(Param(name), "expected an integer, got " + JsonTypeName(*value));
  if (value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    ThrowInvalid(Param(name), RangeText(min, max) + ", got " + value->dump());
  }
  double as_double = value->get<double>();
  if (as_double < double(min) || as_double > double(max)) {
    ThrowInvalid(Param(name), RangeText(min, max) + ", got " + value->dump());
  }
  return value->is_number_float() ? static_cast<int64_t>(as_double) : value->get<int64_t>();
}

const Json* JsonFields::Array(const std::string& name) const {
  const Json* value = Get(name);
  if (value != nullptr && !value->is_array()) {
    ThrowInvalid(Param(name), "expected an array, got " + JsonTypeName(*value));
  }
  return value;
}

const Json* JsonFields::Object(const std::string& name) const {
  const Json* value = Get(name);
  if (value != nullptr && !value->is_object()) {
    ThrowInvalid(Param(name), "expected an object, got " + JsonTypeName(*value));
  }
  return value;
}

Json JsonFields::Metadata(const std::string& name) const {
  const Json* metadata = Object(name);
  if (metadata == nullptr) return Json::object();
  if (metadata->size() > 16) ThrowInvalid(Param(name), "at most 16 keys");
  for (const auto& [key, value] : metadata->items()) {
    if (key.size() > 64) ThrowInvalid(Param(name), "keys are at most 64 characters");
    if (!value.is_string() || value.get<std::string>().size() > 512) {
      ThrowInvalid(Param(name) + "." + key, "must be a string of at most 512 characters");
    }
  }
  return *metadata;
}

}  // namespace mkserve::server
