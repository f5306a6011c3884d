// ResponseStore: the /v1/responses results kept for GET / DELETE /v1/responses/{id}, their
// input_items, and a later request's previous_response_id. In memory only, so a restart forgets
// them; thread-safe. It keeps the most recently used responses while their JSON totals at most
// `max_bytes` (a conversation continued turn after turn stores its whole context with every
// turn, so the bound is on bytes, not on a count). They are kept as JSON text, which is what
// they weigh (a parsed tree weighs several times more), and parsed again when read. A response
// larger than the whole store is not kept.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "server/json.h"
#include "server/recent_by_bytes.h"

namespace mkserve::server {

struct StoredResponse {
  Json response;     // the response object as it was returned
  Json input_items;  // the request's own input items, each with an id
  // The items a follow-up (previous_response_id) continues: the previous response's context,
  // then input_items, then the response's output items.
  Json context;
};

class ResponseStore {
 public:
  explicit ResponseStore(int64_t max_bytes) : kept_(max_bytes) {}

  // Keeps `stored` under its response id; false when it alone is over the bound.
  bool Put(StoredResponse stored);
  // The response `id` (now the most recently used), or null.
  std::unique_ptr<const StoredResponse> Get(const std::string& id);
  // Forgets `id`; false when it was not kept.
  bool Erase(const std::string& id);

  bool enabled() const { return kept_.max_bytes() > 0; }
  int64_t max_bytes() const { return kept_.max_bytes(); }
  int64_t bytes() const;
  size_t size() const;

 private:
  struct Text {  // JSON text, shared with the readers that parse it outside the lock
    std::shared_ptr<const std::string> response, input_items, context;
  };

  mutable std::mutex mutex_;
  RecentByBytes<Text> kept_;
};

}  // namespace mkserve::server
