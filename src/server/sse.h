// Server-sent events framing as OpenAI streams use it: one `data: <json>` line and a blank line
// per event, ending with `data: [DONE]`.
#pragma once

#include <string>
#include <string_view>

#include "server/json.h"

namespace mkserve::server {

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

std::string SseEvent(const Json& payload);

// Serialises JSON for a response; invalid UTF-8 (a model can emit it) becomes U+FFFD instead of
// throwing.
std::string DumpJson(const Json& value);

}  // namespace mkserve::server
