// Identity shared by every chunk of one response: id, creation time, model name.
#pragma once

#include <cstdint>
#include <string>

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

// OpenAI `usage`, with prompt_tokens_details.cached_tokens.
Json UsageJson(const Usage& usage);

}  // namespace mkserve::server
