// ResponseStore: kept by id, the least recently used evicted first when the bytes would pass the
// bound, a response over the whole bound never kept, and Erase.
#include "server/response_store.h"

#include <gtest/gtest.h>

#include <string>

#include "server/sse.h"

namespace mkserve::server {
namespace {

// A stored response of about `bytes` serialised bytes.
StoredResponse Sized(const std::string& id, size_t bytes) {
  return {{{"id", id}, {"pad", std::string(bytes, 'x')}}, Json::array(), Json::array()};
}

int64_t SizeOf(const StoredResponse& stored) {
  return static_cast<int64_t>(DumpJson(stored.response).size() +
                              DumpJson(stored.input_items).size() +
                              DumpJson(stored.context).size());
}

TEST(ResponseStoreTest, KeepsByIdAndErases) {
  ResponseStore store(1 << 20);
  EXPECT_TRUE(store.enabled());
  StoredResponse a = Sized("resp_a", 10);
  a.input_items = Json::array({{{"id", "msg_1"}}});
  ASSERT_TRUE(store.Put(a));
  std::shared_ptr<const StoredResponse> got = store.Get("resp_a");  // a reader keeps its copy
  ASSERT_TRUE(got);
  EXPECT_EQ(got->response, a.response);
  EXPECT_EQ(got->input_items, a.input_items);
  EXPECT_EQ(store.bytes(), SizeOf(a));
  EXPECT_EQ(store.Get("resp_b"), nullptr);
  EXPECT_TRUE(store.Erase("resp_a"));
  EXPECT_FALSE(store.Erase("resp_a"));
  EXPECT_EQ(store.Get("resp_a"), nullptr);
  EXPECT_EQ(store.bytes(), 0);
  EXPECT_EQ(got->response["id"], "resp_a");  // a reader's copy outlives the erase
}

TEST(ResponseStoreTest, EvictsTheLeastRecentlyUsedWithinTheBound) {
  const int64_t one = SizeOf(Sized("resp_1", 1000));
  ResponseStore store(3 * one);
  for (const char* id : {"resp_1", "resp_2", "resp_3"}) ASSERT_TRUE(store.Put(Sized(id, 1000)));
  ASSERT_TRUE(store.Get("resp_1"));  // now the most recently used
  ASSERT_TRUE(store.Put(Sized("resp_4", 1000)));
  EXPECT_EQ(store.size(), 3u);
  EXPECT_EQ(store.Get("resp_2"), nullptr);  // the least recently used went
  for (const char* id : {"resp_1", "resp_3", "resp_4"}) EXPECT_TRUE(store.Get(id)) << id;
  // One of nearly twice the size evicts two; the bound always holds.
  ASSERT_TRUE(store.Put(Sized("resp_5", 2 * 1000 - 40)));
  EXPECT_LE(store.bytes(), 3 * one);
  EXPECT_EQ(store.size(), 2u);
  EXPECT_TRUE(store.Get("resp_5"));
}

TEST(ResponseStoreTest, ReplacesAnIdAndRefusesWhatCannotFit) {
  ResponseStore store(4096);
  ASSERT_TRUE(store.Put(Sized("resp_a", 100)));
  ASSERT_TRUE(store.Put(Sized("resp_a", 200)));
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.bytes(), SizeOf(Sized("resp_a", 200)));
  EXPECT_FALSE(store.Put(Sized("resp_big", 5000)));  // alone over the bound: kept nowhere
  EXPECT_TRUE(store.Get("resp_a"));                  // and nothing evicted for it
  EXPECT_FALSE(store.Put({Json::object(), Json::array(), Json::array()}));  // no id
  ResponseStore off(0);
  EXPECT_FALSE(off.enabled());
  EXPECT_FALSE(off.Put(Sized("resp_a", 1)));
}

}  // namespace
}  // namespace mkserve::server
