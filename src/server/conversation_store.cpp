#include "server/conversation_store.h"

#include "server/sse.h"

namespace mkserve::server {

int64_t ConversationStore::BytesOf(const Conversation& conversation) {
  return static_cast<int64_t>(conversation.id.size() + DumpJson(conversation.metadata).size() +
                              DumpJson(conversation.items).size());
}

bool ConversationStore::Put(Conversation conversation) {
  const int64_t bytes = BytesOf(conversation);
  if (conversation.id.empty() || bytes > max_bytes_) return false;
  std::lock_guard lock(mutex_);
  if (auto it = by_id_.find(conversation.id); it != by_id_.end()) EraseLocked(it->second);
  while (!entries_.empty() && bytes_ + bytes > max_bytes_) EraseLocked(std::prev(entries_.end()));
  const std::string id = conversation.id;
  entries_.push_front({std::move(conversation), bytes});
  by_id_[id] = entries_.begin();
  bytes_ += bytes;
  return true;
}

std::optional<Conversation> ConversationStore::Get(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  entries_.splice(entries_.begin(), entries_, it->second);
  return it->second->conversation;
}

bool ConversationStore::Update(const std::string& id,
                               const std::function<void(Conversation&)>& change) {
  std::lock_guard lock(mutex_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  Conversation changed = it->second->conversation;
  change(changed);
  const int64_t bytes = BytesOf(changed);
  if (bytes > max_bytes_) return false;
  entries_.splice(entries_.begin(), entries_, it->second);  // the first: not evicted below
  bytes_ -= entries_.front().bytes;
  entries_.front() = {std::move(changed), bytes};
  bytes_ += bytes;
  // The least recently used go; the changed one, first and within the bound alone, stays.
  while (bytes_ > max_bytes_) EraseLocked(std::prev(entries_.end()));
  return true;
}

bool ConversationStore::Erase(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  EraseLocked(it->second);
  return true;
}

int64_t ConversationStore::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

size_t ConversationStore::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

void ConversationStore::EraseLocked(std::list<Entry>::iterator it) {
  bytes_ -= it->bytes;
  by_id_.erase(it->conversation.id);
  entries_.erase(it);
}

}  // namespace mkserve::server
