// An assistant prefill: the conversation ends with an assistant message the model should
// continue. Templates render every assistant message as a closed turn, so, as transformers'
// apply_chat_template(continue_final_message=True) does, the rendered prompt (made without a
// generation prompt) is cut right after the final message's text.
#pragma once

#include <string>
#include <string_view>

namespace mkserve::chat {

// The render cut after the last occurrence of `final_text` (after its whitespace-stripped form
// when the template dropped trailing whitespace). Throws mkserve::Error when the stripped text is
// empty or the render does not contain it: there is nothing to continue.
std::string ContinueFinalMessage(std::string_view rendered, std::string_view final_text);

}  // namespace mkserve::chat
