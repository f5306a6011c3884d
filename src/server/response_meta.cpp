#include "server/response_meta.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>

#include "server/sse.h"

namespace mkserve::server {

ResponseMeta NewResponseMeta(const std::string& prefix, const std::string& model) {
  // A per-process random tag plus a counter: unique without a lock.
  static const uint32_t process_tag = std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  char suffix[40];
  std::snprintf(suffix, sizeof(suffix), "%08x%012llx", process_tag,
                static_cast<unsigned long long>(counter.fetch_add(1)));
  auto now = std::chrono::system_clock::now().time_since_epoch();
  return {prefix + suffix, std::chrono::duration_cast<std::chrono::seconds>(now).count(), model};
}

Json UsageJson(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
}

Json ResponseJson(const ResponseMeta& meta, std::string_view object, Json choices) {
  return {{"id", meta.id},
          {"object", object},
          {"created", meta.created_unix_s},
          {"model", meta.model},
          {"choices", std::move(choices)}};
}

std::string StreamEndEvents(const ResponseMeta& meta, std::string_view object, bool include_usage,
                            const Usage& usage) {
  std::string events;
  if (include_usage) {
    Json chunk = ResponseJson(meta, object, Json::array());
    chunk["usage"] = UsageJson(usage);
    events += SseEvent(chunk);
  }
  events += kSseDone;
  return events;
}

}  // namespace mkserve::server
