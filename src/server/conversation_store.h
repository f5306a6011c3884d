// ConversationStore: the conversations of the Conversations API (/v1/conversations) and of
// /v1/responses' `conversation`. A conversation is an id, its metadata and its items in order,
// each item with an id. In memory only, so a restart forgets them; thread-safe. It keeps the most
// recently used conversations while their JSON totals at most `max_bytes`; a change that would
// make one conversation larger than the whole store is refused.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "server/json.h"
#include "server/recent_by_bytes.h"

namespace mkserve::server {

struct Conversation {
  std::string id;
  int64_t created_at = 0;
  Json metadata = Json::object();
  Json items = Json::array();  // each with "id"
  int64_t next_item = 0;       // the number in the next item id the server makes
};

class ConversationStore {
 public:
  explicit ConversationStore(int64_t max_bytes) : kept_(max_bytes) {}

  bool enabled() const { return kept_.max_bytes() > 0; }
  // Keeps a new conversation; false when it alone is over the bound.
  bool Put(Conversation conversation);
  // Conversation `id` (now the most recently used), or nullopt.
  std::optional<Conversation> Get(const std::string& id);
  // Runs `change` on conversation `id` and keeps the result; false (and no change) when it is not
  // kept or the result alone is over the bound.
  bool Update(const std::string& id, const std::function<void(Conversation&)>& change);
  // Forgets `id`; false when it was not kept.
  bool Erase(const std::string& id);

  int64_t bytes() const;
  size_t size() const;

 private:
  static int64_t BytesOf(const Conversation& conversation);

  mutable std::mutex mutex_;
  RecentByBytes<Conversation> kept_;
};

}  // namespace mkserve::server
