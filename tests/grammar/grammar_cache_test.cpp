#include "grammar/grammar_cache.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "grammar_test_util.h"

namespace mkserve::grammar {
namespace {

Grammar Compile(const char* schema) {
  JsonGrammarBuilder builder;
  const int32_t root = builder.AddSchema(Json::parse(schema), "schema");
  return std::move(builder).Finish(root);
}

constexpr const char* kA = R"({"type": "integer", "minimum": 1})";
constexpr const char* kB = R"({"type": "integer", "minimum": 2})";
constexpr const char* kC = R"({"type": "string", "pattern": "^a+$"})";

TEST(GrammarCacheTest, TheSameGrammarIsCompiledOnce) {
  GrammarCache cache(ByteVocabulary(), 8, 1000);
  const auto first = cache.Get(Compile(kA));
  EXPECT_EQ(cache.Get(Compile(kA)), first);
  EXPECT_NE(cache.Get(Compile(kB)), first);  // one byte set apart
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_NE(GrammarContent(Compile(kA)), GrammarContent(Compile(kB)));
}

TEST(GrammarCacheTest, KeepsTheMostRecentlyUsed) {
  GrammarCache cache(ByteVocabulary(), 2, 1000);
  const auto a = cache.Get(Compile(kA));
  const auto b = cache.Get(Compile(kB));
  EXPECT_EQ(cache.Get(Compile(kA)), a);  // a is now the most recent
  cache.Get(Compile(kC));                // b goes
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.Get(Compile(kA)), a);
  EXPECT_NE(cache.Get(Compile(kB)), b);
}

TEST(GrammarCacheTest, CachedPositionsBoundWhatItKeeps) {
  GrammarCache cache(ByteVocabulary(), 8, 3);
  const auto a = cache.Get(Compile(kC));
  GrammarMatcher matcher(a);  // masks along "aaa build caches of a's positions
  std::vector<uint32_t> mask(MaskWords(256));
  for (char c : std::string("\"aaa")) {
    matcher.FillMask({}, mask);
    ASSERT_TRUE(matcher.Accept(static_cast<unsigned char>(c)));
  }
  ASSERT_GT(a->cache.size(), 3u);
  cache.Get(Compile(kA));  // over the budget: a goes, the newest stays
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_NE(cache.Get(Compile(kC)), a);
}

TEST(GrammarCacheTest, ThreadsAskingAtOnceShareOneGrammar) {
  GrammarCache cache(ByteVocabulary(), 8, 1000);
  std::vector<std::shared_ptr<const CompiledGrammar>> got(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] { got[i] = cache.Get(Compile(kC)); });
  }
  for (std::thread& thread : threads) thread.join();
  for (const auto& grammar : got) EXPECT_EQ(grammar, got[0]);
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
}  // namespace mkserve::grammar
