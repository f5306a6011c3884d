// Identity shared by every chunk of one response: id, creation time, model name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/engine_events.h"
#include "server/json.h"

namespace mkserve::server {

struct ResponseMeta {
  std::string id;  // "chatcmpl-..." / "cmpl-..."
  int64_t created_unix_s = 0;
  std::string model;
};

// A fresh meta with a unique id under `prefix`.
ResponseMeta NewResponseMeta(const std::string& prefix, const std::string& model);

// {"id", "object", "created", "model", "choices"}: every response body and chunk starts so.
Json ResponseJson(const ResponseMeta& meta, std::string_view object, Json choices);

// OpenAI `usage`, with prompt_tokens_details.cached_tokens.
Json UsageJson(const Usage& usage);

// The last events of a stream: with include_usage a chunk of `object` ("chat.completion.chunk",
// "text_completion") with no choices and the usage, then [DONE].
std::string StreamEndEvents(const ResponseMeta& meta, std::string_view object, bool include_usage,
                            const Usage& usage);

}  // namespace mkserve::server
