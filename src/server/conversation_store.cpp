#include "server/conversation_store.h"

#include "server/sse.h"

namespace mkserve::server {

int64_t ConversationStore::BytesOf(const Conversation& conversation) {
  return static_cast<int64_t>(conversation.id.size() + DumpJson(conversation.metadata).size() +
                              DumpJson(conversation.items).size());
}

bool ConversationStore::Put(Conversation conversation) {
  if (conversation.id.empty()) return false;
  const int64_t bytes = BytesOf(conversation);
  const std::string id = conversation.id;
  std::lock_guard lock(mutex_);
  return kept_.Put(id, std::move(conversation), bytes);
}

std::optional<Conversation> ConversationStore::Get(const std::string& id) {
  std::lock_guard lock(mutex_);
  const Conversation* found = kept_.Find(id);
  if (found == nullptr) return std::nullopt;
  return *found;
}

bool ConversationStore::Update(const std::string& id,
                               const std::function<void(Conversation&)>& change) {
  std::lock_guard lock(mutex_);
  const Conversation* found = kept_.Find(id);
  if (found == nullptr) return false;
  Conversation changed = *found;
  change(changed);
  const int64_t bytes = BytesOf(changed);
  return kept_.Put(id, std::move(changed), bytes);
}

bool ConversationStore::Erase(const std::string& id) {
  std::lock_guard lock(mutex_);
  return kept_.Erase(id);
}

int64_t ConversationStore::bytes() const {
  std::lock_guard lock(mutex_);
  return kept_.bytes();
}

size_t ConversationStore::size() const {
  std::lock_guard lock(mutex_);
  return kept_.size();
}

}  // namespace mkserve::server
