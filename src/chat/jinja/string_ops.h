// Python str operations shared by string methods and filters (code-point aware; case
// mapping covers ASCII only).
#pragma once

#include <string>
#include <vector>

#include "chat/jinja/value.h"

namespace mkserve::chat::jinja {

// Python str.strip/lstrip/rstrip; `chars` None strips whitespace.
std::string StripString(const std::string& text, const Value& chars, bool left, bool right);
// Python str.split(sep, maxsplit); `sep` None splits on whitespace runs.
Array SplitString(const std::string& text, const Value& sep, int64_t maxsplit);
std::string ReplaceString(const std::string& text, const std::string& old_text,
                          const std::string& new_text, int64_t count);
std::string ToUpper(std::string text);
std::string ToLower(std::string text);
std::string TitleCase(const std::string& text);
std::string Capitalize(const std::string& text);
// Python str.format with {} / {0} / {name} fields and no format specs.
std::string FormatString(const std::string& format, const CallArgs& args);

}  // namespace mkserve::chat::jinja
