#include "server/response_store.h"

#include "server/sse.h"

namespace mkserve::server {

bool ResponseStore::Put(StoredResponse stored) {
  const std::string id = stored.response.value("id", "");
  if (id.empty()) return false;
  Text text{std::make_shared<const std::string>(DumpJson(stored.response)),
            std::make_shared<const std::string>(DumpJson(stored.input_items)),
            std::make_shared<const std::string>(DumpJson(stored.context))};
  const auto bytes =
      static_cast<int64_t>(text.response->size() + text.input_items->size() + text.context->size());
  std::lock_guard lock(mutex_);
  return kept_.Put(id, std::move(text), bytes);
}

std::unique_ptr<const StoredResponse> ResponseStore::Get(const std::string& id) {
  Text text;
  {
    std::lock_guard lock(mutex_);
    const Text* found = kept_.Find(id);
    if (found == nullptr) return nullptr;
    text = *found;
  }
  // Parsed outside the lock: the text is shared and never changes.
  return std::make_unique<const StoredResponse>(StoredResponse{
      Json::parse(*text.response), Json::parse(*text.input_items), Json::parse(*text.context)});
}

bool ResponseStore::Erase(const std::string& id) {
  std::lock_guard lock(mutex_);
  return kept_.Erase(id);
}

int64_t ResponseStore::bytes() const {
  std::lock_guard lock(mutex_);
  return kept_.bytes();
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mutex_);
  return kept_.size();
}

}  // namespace mkserve::server
