#include "chat/continue_final_message.h"

#include "common/error.h"

namespace mkserve::chat {

namespace {

constexpr std::string_view kWhitespace = " \t\n\r\f\v";

std::string_view StripLeft(std::string_view text) {
  size_t first = text.find_first_not_of(kWhitespace);
  return first == std::string_view::npos ? std::string_view() : text.substr(first);
}

std::string_view Strip(std::string_view text) {
  text = StripLeft(text);
  return text.substr(0, text.find_last_not_of(kWhitespace) + 1);
}

}  // namespace

std::string ContinueFinalMessage(std::string_view rendered, std::string_view final_text) {
  std::string_view stripped = Strip(final_text);
  size_t at = stripped.empty() ? std::string_view::npos : rendered.rfind(stripped);
  if (at == std::string_view::npos) {
    throw Error(
        "the chat template did not write the final assistant message's text, so it cannot be "
        "continued");
  }
  // Keep trailing whitespace of the message when the template kept it.
  std::string_view kept = StripLeft(final_text);
  size_t end = rendered.substr(at, kept.size()) == kept ? at + kept.size() : at + stripped.size();
  return std::string(rendered.substr(0, end));
}

}  // namespace mkserve::chat
