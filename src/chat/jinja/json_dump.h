// Python json.dumps of template values, as transformers' own `tojson` filter calls it:
// json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys).
#pragma once

#include <optional>
#include <string>

#include "chat/jinja/value.h"

namespace mkserve::chat::jinja {

struct JsonDumpOptions {
  std::optional<std::string> indent;          // None: one line; otherwise the per-level indent text
  std::optional<std::string> item_separator;  // default ", " (one line) or "," (indented)
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};

// Throws TemplateError for values JSON cannot hold (Undefined, functions).
std::string DumpJson(const Value& value, const JsonDumpOptions& options);

}  // namespace mkserve::chat::jinja
