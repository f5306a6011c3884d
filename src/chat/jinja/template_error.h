// Errors raised while parsing or rendering a template. Helpers throw without a line; the
// evaluator adds the line of the innermost node that failed, so every message names a line.
#pragma once

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

}  // namespace mkserve::chat::jinja
