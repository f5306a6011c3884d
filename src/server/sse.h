// Server-sent events framing as OpenAI streams use it: one `data: <json>` line and a blank line
// per event, ending with `data: [DONE]` (chat and completions; the Responses API names each event
// and has no [DONE]).
#pragma once

#include <string>
#include <string_view>

#include "server/json.h"

namespace mkserve::server {

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

std::string SseEvent(const Json& payload);
// `event: <name>` before the data line, as the Responses API names its events.
std::string NamedSseEvent(const std::string& name, const Json& payload);

// Serialises JSON for a response; invalid UTF-8 (a model can emit it) becomes U+FFFD instead of
// throwing.
std::string DumpJson(const Json& value);

}  // namespace mkserve::server
