// Renders a template string with a JSON context; the Jinja tests use it to state expected
// outputs as Python jinja2 (transformers) would produce them.
#pragma once

#include <string>

#include "chat/chat_template.h"
#include "common/error.h"

namespace mkserve::chat::jinja {

inline std::string RenderText(const std::string& source, const nlohmann::ordered_json& context =
                                                             nlohmann::ordered_json::object()) {
  return ChatTemplate::Parse(source).Render(context);
}

// The error message of rendering (or parsing) `source`, or "" when it succeeds.
inline std::string RenderError(const std::string& source, const nlohmann::ordered_json& context =
                                                              nlohmann::ordered_json::object()) {
  try {
    RenderText(source, context);
  } catch (const mkserve::Error& error) {
    return error.what();
  }
  return "";
}

}  // namespace mkserve::chat::jinja
