#include "server/response_store.h"

#include "server/sse.h"

namespace mkserve::server {

bool ResponseStore::Put(StoredResponse stored) {
  const std::string id = stored.response.value("id", "");
  auto response = std::make_shared<const std::string>(DumpJson(stored.response));
  auto input_items = std::make_shared<const std::string>(DumpJson(stored.input_items));
  auto context = std::make_shared<const std::string>(DumpJson(stored.context));
  const auto bytes = static_cast<int64_t>(response->size() + input_items->size() + context->size());
  if (id.empty() || bytes > max_bytes_) return false;
  std::lock_guard lock(mutex_);
  if (auto it = by_id_.find(id); it != by_id_.end()) EraseLocked(it->second);
  while (!entries_.empty() && bytes_ + bytes > max_bytes_) EraseLocked(std::prev(entries_.end()));
  entries_.push_front({id, std::move(response), std::move(input_items), std::move(context), bytes});
  by_id_[id] = entries_.begin();
  bytes_ += bytes;
  return true;
}

std::unique_ptr<const StoredResponse> ResponseStore::Get(const std::string& id) {
  Entry entry;
  {
    std::lock_guard lock(mutex_);
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return nullptr;
    entries_.splice(entries_.begin(), entries_, it->second);
    entry = *it->second;
  }
  // Parsed outside the lock: the text is shared and never changes.
  return std::make_unique<const StoredResponse>(StoredResponse{
      Json::parse(*entry.response), Json::parse(*entry.input_items), Json::parse(*entry.context)});
}

bool ResponseStore::Erase(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  EraseLocked(it->second);
  return true;
}

void ResponseStore::EraseLocked(std::list<Entry>::iterator it) {
  bytes_ -= it->bytes;
  by_id_.erase(it->id);
  entries_.erase(it);
}

int64_t ResponseStore::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace mkserve::server
