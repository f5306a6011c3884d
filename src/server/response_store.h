// ResponseStore: the /v1/responses results kept for GET / DELETE /v1/responses/{id}, their
// input_items, and a later request's previous_response_id. In memory only, so a restart forgets
// them; thread-safe. It keeps the most recently used responses while their JSON totals at most
// `max_bytes` (a conversation continued turn after turn stores its whole context with every
// turn, so the bound is on bytes, not on a count). They are kept as JSON text, which is what
// they weigh (a parsed tree weighs several times more), and parsed again when read. A response
// larger than the whole store is not kept.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "server/json.h"

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
  explicit ResponseStore(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // Keeps `stored` under its response id; false when it alone is over the bound.
  bool Put(StoredResponse stored);
  // The response `id` (now the most recently used), or null.
  std::unique_ptr<const StoredResponse> Get(const std::string& id);
  // Forgets `id`; false when it was not kept.
  bool Erase(const std::string& id);

  bool enabled() const { return max_bytes_ > 0; }
  int64_t max_bytes() const { return max_bytes_; }
  int64_t bytes() const;
  size_t size() const;

 private:
  struct Entry {
    std::string id;
    std::shared_ptr<const std::string> response, input_items, context;  // JSON text
    int64_t bytes;
  };
  void EraseLocked(std::list<Entry>::iterator it);

  const int64_t max_bytes_;
  mutable std::mutex mutex_;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> by_id_;
  int64_t bytes_ = 0;
};

}  // namespace mkserve::server
