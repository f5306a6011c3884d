// Errors raised while parsing or rendering a template. Helpers throw without a line; the
// evaluator adds the line of the innermost node that failed, so every message names a line.
#pragma once

#include <cstddef>
#include <string>

#include "common/error.h"

namespace mkserve::chat::jinja {

class TemplateError : public mkserve::Error {
 public:
  explicit TemplateError(const std::string& message, int line = 0)
      : mkserve::Error(line > 0 ? "chat template line " + std::to_string(line) + ": " + message
                                : message),
        detail_(message),
        line_(line) {}

  int line() const { return line_; }
  const std::string& detail() const { return detail_; }
  TemplateError WithLine(int line) const { return TemplateError(detail_, line); }

 private:
  std::string detail_;
  int line_;
};

// The longest text a render builds, printing one value (repr, tojson) or in its whole output: no
// context holds a prompt near it (128K tokens are about a megabyte of text).
inline constexpr size_t kMaxTextBytes = size_t{1} << 27;

// `what` names the text: "the template writes", "a value prints as", ...
inline void CheckTextBytes(size_t bytes, const char* what) {
  if (bytes > kMaxTextBytes) throw TemplateError(std::string(what) + " more than 128 MiB of text");
}

}  // namespace mkserve::chat::jinja
