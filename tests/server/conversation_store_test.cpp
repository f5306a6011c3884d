#include "server/conversation_store.h"

#include <gtest/gtest.h>

#include <string>

namespace mkserve::server {
namespace {

Conversation Made(const std::string& id, size_t text_bytes) {
  Conversation conversation;
  conversation.id = id;
  conversation.items.push_back({{"id", "msg_1"}, {"text", std::string(text_bytes, 'x')}});
  return conversation;
}

TEST(ConversationStoreTest, KeepsUpdatesAndForgets) {
  ConversationStore store(1 << 20);
  ASSERT_TRUE(store.Put(Made("conv_a", 10)));
  EXPECT_FALSE(store.Get("conv_b").has_value());
  ASSERT_TRUE(store.Update("conv_a", [](Conversation& c) {
    c.items.push_back({{"id", "msg_2"}});
    c.metadata["k"] = "v";
  }));
  const std::optional<Conversation> got = store.Get("conv_a");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->items.size(), 2u);
  EXPECT_EQ(got->metadata["k"], "v");
  EXPECT_FALSE(store.Update("conv_b", [](Conversation&) {}));
  EXPECT_TRUE(store.Erase("conv_a"));
  EXPECT_FALSE(store.Erase("conv_a"));
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.bytes(), 0);
}

// Within the bound the least recently used go first; a conversation that an update would make
// larger than the whole store keeps what it had; the one just changed is never the one evicted.
TEST(ConversationStoreTest, KeepsToItsBytesByRecentUse) {
  ConversationStore store(3000);
  ASSERT_TRUE(store.Put(Made("conv_a", 900)));
  ASSERT_TRUE(store.Put(Made("conv_b", 900)));
  ASSERT_TRUE(store.Put(Made("conv_c", 900)));
  EXPECT_TRUE(store.Get("conv_a").has_value());  // a is now the most recent: b is the oldest
  ASSERT_TRUE(store.Put(Made("conv_d", 900)));
  EXPECT_FALSE(store.Get("conv_b").has_value());
  EXPECT_TRUE(store.Get("conv_c").has_value());
  EXPECT_LE(store.bytes(), 3000);
  // Growing c past the others evicts them, not c.
  ASSERT_TRUE(
      store.Update("conv_c", [](Conversation& c) { c.items[0]["text"] = std::string(2500, 'y'); }));
  EXPECT_TRUE(store.Get("conv_c").has_value());
  EXPECT_LE(store.bytes(), 3000);
  EXPECT_EQ(store.size(), 1u);
  EXPECT_FALSE(
      store.Update("conv_c", [](Conversation& c) { c.items[0]["text"] = std::string(5000, 'z'); }));
  EXPECT_EQ(store.Get("conv_c")->items[0]["text"].get<std::string>().size(), 2500u);
  EXPECT_FALSE(store.Put(Made("conv_e", 5000)));
  EXPECT_FALSE(ConversationStore(0).enabled());
}

}  // namespace
}  // namespace mkserve::server
