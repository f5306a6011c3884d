#include "grammar/grammar_matcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/error.h"
#include "grammar/json_schema.h"
#include "grammar/position_cache.h"
#include "grammar_test_util.h"

namespace mkserve::grammar {
namespace {

constexpr int32_t kSpecialA = 0;  // special tokens at the start of the synthetic vocabulary
constexpr int32_t kSpecialB = 1;
constexpr int32_t kEnd = 2;

// Tokens that stress the matcher: every single byte, JSON punctuation glued to text, escapes
// split anywhere, UTF-8 characters cut in the middle, and random byte strings.
std::shared_ptr<const TokenVocabulary> StressVocabulary(uint32_t seed, int extra) {
  std::vector<std::string> bytes = {"<A>", "<B>", "<END>"};
  std::vector<bool> special = {true, true, true};
  auto add = [&](std::string text) {
    bytes.push_back(std::move(text));
    special.push_back(false);
  };
  for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)));
  for (const char* text :
       {"\"",        "\":",  "\": \"",   "\",",      "\"}",    "\"]",  "{\"",      "[\"",
        "\\\"",      "\\",   "\\u",      "\\u00",    "00e9",   "\\n",  "true",     "false",
        "null",      "nul",  "1.5",      "-0",       "e+1",    "  ",   "\n  ",     "\n\n",
        "\xc3",      "\xa9", "\xc3\xa9", "\xe2\x82", "\xac\"", "name", "\"name\"", "age",
        "\"age\": ", "2024", "-01-",     "T12",      ":00Z\"", "@",    ".com\"",   "abc\"",
        "},{",       "]}",   "[]",       "{}"}) {
    add(text);
  }
  // Runs of more characters than a counted cache keeps a bitmask for (kRoundBuckets).
  for (const char* text :
       {"abcdefghijklmnopqrstu", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "\\n\\n\\n\\n\\n\\n\\n\\n\\n\\n\\n\\n\\n\\n\\n\\n\\n", "aaaaaaaaaaaaaaaaaaa\"",
        "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"}) {
    add(text);
  }
  add("");  // an empty ordinary token is never allowed
  std::mt19937 random(seed);
  const std::string alphabet = "{}[]\":,. \n\\-+eE0123456789abcnrtu@TZxyz\xc3\xa9\xe2\x82\xac";
  for (int i = 0; i < extra; ++i) {
    std::string text;
    int length = 1 + static_cast<int>(random() % 6);
    for (int j = 0; j < length; ++j) text += alphabet[random() % alphabet.size()];
    add(text);
  }
  return std::make_shared<TokenVocabulary>(bytes, special);
}

// Walks random allowed tokens and checks, at every step, that the mask equals trying each token.
void CheckMaskAgainstBruteForce(const Grammar& grammar, uint32_t seed, int steps) {
  auto vocabulary = StressVocabulary(seed, 600);
  auto compiled = std::make_shared<CompiledGrammar>(grammar, vocabulary);
  GrammarMatcher matcher(compiled);
  std::mt19937 random(seed);
  std::vector<uint32_t> mask(MaskWords(vocabulary->size()));
  const std::vector<int32_t> end_ids = {kEnd};
  for (int step = 0; step < steps; ++step) {
    matcher.FillMask(end_ids, mask);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < vocabulary->size(); ++id) {
      GrammarMatcher trial = matcher;
      bool expected = id == kEnd ? matcher.can_end() : trial.Accept(id);
      ASSERT_EQ(MaskAllows(mask, id), expected)
          << "step " << step << " token " << id << " '" << vocabulary->bytes(id) << "'";
      if (expected && id != kEnd) allowed.push_back(id);
    }
    if (allowed.empty()) {
      EXPECT_TRUE(matcher.can_end()) << "a dead end at step " << step;
      return;
    }
    ASSERT_TRUE(matcher.Accept(allowed[random() % allowed.size()]));
  }
}

TEST(GrammarMatcherTest, MaskEqualsBruteForceForJsonObject) {
  JsonGrammarBuilder builder;
  int32_t root = builder.rules().object;
  Grammar grammar = std::move(builder).Finish(root);
  for (uint32_t seed = 1; seed <= 6; ++seed) CheckMaskAgainstBruteForce(grammar, seed, 60);
}

// The mask of `schema`'s grammar against trying every token, along random walks of six seeds.
void CheckSchemaMasks(const char* schema, int steps) {
  JsonGrammarBuilder builder;
  const int32_t root = builder.AddSchema(Json::parse(schema), "schema");
  const Grammar grammar = std::move(builder).Finish(root);
  for (uint32_t seed = 1; seed <= 6; ++seed) CheckMaskAgainstBruteForce(grammar, seed, steps);
}

TEST(GrammarMatcherTest, MaskEqualsBruteForceForSchema) {
  CheckSchemaMasks(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": ["integer", "null"]},
      "when": {"type": "string", "format": "date-time"},
      "tags": {"type": "array", "items": {"enum": ["a", "b\"c", 1.5]}, "maxItems": 3}},
      "required": ["name", "tags"], "additionalProperties": false})",
                   60);
}

// The new combinators, and alternatives that can never end (an anyOf entry that requires
// itself; distinct enum items past the values left): dropped, or a mask would pass a token the
// matcher refuses.
TEST(GrammarMatcherTest, MaskEqualsBruteForceForMergedAndExclusiveSchemas) {
  CheckSchemaMasks(R"({"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": true,
      "minItems": 2})",
                   40);
  CheckSchemaMasks(R"({"type": "array", "items": {"enum": ["cat", 0, "dog"]}, "uniqueItems": true,
      "minItems": 2})",
                   40);
  CheckSchemaMasks(R"({"anyOf": [{"type": "object", "properties": {"a": {"$ref": "#/anyOf/0"}},
      "required": ["a"]}, {"type": "null"}, {"type": "array", "prefixItems": [{"const": 1},
      {"type": "string"}], "items": false}]})",
                   40);
  CheckSchemaMasks(R"({"$defs": {"Cat": {"type": "object", "properties": {"k": {"const": "c"},
      "n": {"type": "integer"}}, "required": ["k", "n"]}}, "type": "object", "properties": {
      "pet": {"oneOf": [{"$ref": "#/$defs/Cat"}, {"type": "null"}]},
      "who": {"allOf": [{"$ref": "#/$defs/Cat"}, {"properties": {"m": {"type": "boolean"}}}]}},
      "required": ["pet", "who"]})",
                   80);
}

// A host name's labels are counted loops inside a budget of rules (json_prelude.cpp): tokens that
// span labels and dots must be masked as trying them says.
TEST(GrammarMatcherTest, MaskEqualsBruteForceForHostnames) {
  CheckSchemaMasks(R"({"type": "array", "items": {"type": "string", "format": "hostname"}})", 120);
}

// multipleOf without bounds: a rule per remainder and digit count (multiple_of.h), entered and
// left by tokens of several digits.
TEST(GrammarMatcherTest, MaskEqualsBruteForceForUnboundedMultiples) {
  CheckSchemaMasks(R"({"type": "array", "items": {"anyOf": [
      {"type": "number", "multipleOf": 0.25}, {"type": "integer", "multipleOf": 7}]}})",
                   120);
}

// Pattern classes of non-ASCII characters: a byte set a UTF-8 position (string_pattern.cpp).
TEST(GrammarMatcherTest, MaskEqualsBruteForceForNonAsciiClasses) {
  CheckSchemaMasks(R"({"type": "string", "pattern": "^[a-z\u00e0-\u00ff\u4e00-\u9fff]+$"})", 80);
}

// Nesting up to the matcher's depth limit and past it: a cache's token opens levels above its
// element, so near the limit a token the cache accepts may be cut off on the real stack. The mask
// must still equal trying each token (a mismatch failed the request with "sampled token ... which
// the output grammar does not allow").
TEST(GrammarMatcherTest, MaskEqualsBruteForceAtTheNestingLimit) {
  for (const char* schema : {"{}", R"({"type": "array"})"}) {
    JsonGrammarBuilder builder;
    const int32_t root = builder.AddSchema(Json::parse(schema), "schema");
    auto vocabulary = StressVocabulary(7, 0);
    auto compiled = std::make_shared<CompiledGrammar>(std::move(builder).Finish(root), vocabulary);
    GrammarMatcher matcher(compiled);
    const int32_t open = 3 + '[';  // the single-byte tokens follow the three special ones
    ASSERT_EQ(vocabulary->bytes(open), "[");
    std::vector<uint32_t> mask(MaskWords(vocabulary->size()));
    int depth = 0;
    for (; depth < 400; ++depth) {
      matcher.FillMask({}, mask);
      if (depth >= 60) {  // the cheap steps first; each check tries every token
        for (int32_t id = 0; id < vocabulary->size(); ++id) {
          GrammarMatcher trial = matcher;
          ASSERT_EQ(MaskAllows(mask, id), trial.Accept(id))
              << schema << " depth " << depth << " token '" << vocabulary->bytes(id) << "'";
        }
      }
      if (!MaskAllows(mask, open)) break;
      ASSERT_TRUE(matcher.Accept(open));
    }
    EXPECT_LT(depth, 400) << schema << ": nesting never stopped";
    EXPECT_GE(depth, 100) << schema << ": nesting stopped early";
  }
}

// Counted strings (minLength, maxLength): the counted caches' rounds and the mask's filter by the
// room left, near the limits and with tokens of more rounds than the buckets hold; and a
// multipleOf spelled out as a trie of its multiples.
TEST(GrammarMatcherTest, MaskEqualsBruteForceForCountedStrings) {
  JsonGrammarBuilder builder;
  int32_t root = builder.AddSchema(Json::parse(R"({"type": "object", "properties": {
      "a": {"type": "string", "minLength": 2, "maxLength": 3},
      "b": {"type": "string", "maxLength": 20},
      "c": {"type": "string", "minLength": 18},
      "d": {"type": "array", "items": {"type": "string", "maxLength": 1}, "maxItems": 2},
      "n": {"type": "integer", "multipleOf": 7, "minimum": -50, "maximum": 300}},
      "required": ["n", "a", "b", "c", "d"], "additionalProperties": false})"),
                                   "schema");
  Grammar grammar = std::move(builder).Finish(root);
  for (uint32_t seed = 1; seed <= 8; ++seed) CheckMaskAgainstBruteForce(grammar, seed, 80);
}

// A counted loop is refused unless its rule is a loop of terminals (each alternative empty, or
// bytes and tokens then the rule again) and its bounds fit the stack's counter.
TEST(GrammarTest, CountedLoopsNeedALoopRuleAndBoundsThatFit) {
  Grammar grammar;
  const int32_t loop = grammar.NewRule();
  grammar.AddAlternative(loop, {});
  grammar.AddAlternative(loop, {grammar.Byte('a'), Element::Rule(loop)});
  const int32_t not_a_loop = grammar.RuleOf({{grammar.Byte('a')}});
  const int32_t nested = grammar.NewRule();
  grammar.AddAlternative(nested, {Element::Rule(not_a_loop), Element::Rule(nested)});
  EXPECT_THROW(grammar.Counted(not_a_loop, 0, 3), Error);
  EXPECT_THROW(grammar.Counted(nested, 0, 3), Error);
  EXPECT_THROW(grammar.Counted(loop, 4, 3), Error);
  EXPECT_THROW(grammar.Counted(loop, 0, kMaxLoopRounds + 1), Error);
  const Element a = grammar.Counted(loop, 1, 3), b = grammar.Counted(loop, 1, 3);
  EXPECT_EQ(a.value, b.value);  // one loop for one rule and bounds
  const CountedLoop& counted = grammar.counted_loop(a.value);
  EXPECT_EQ(grammar.counted_loop(counted.probe).max, kMaxLoopRounds);
  // The counter's entry keeps the loop and the rounds; it sorts below every position.
  const int32_t entry = CounterEntry(kMaxCountedLoops - 1, kMaxLoopRounds);
  EXPECT_TRUE(IsCounter(entry));
  EXPECT_EQ(CounterLoop(entry), kMaxCountedLoops - 1);
  EXPECT_EQ(CounterRounds(entry), kMaxLoopRounds);
  EXPECT_EQ(CounterRounds(CounterEntry(3, 7)), 7);
  EXPECT_EQ(CounterLoop(CounterEntry(3, 7)), 3);
}

TEST(GrammarMatcherTest, SpecialTokensOnlyWhereTheGrammarNamesThem) {
  JsonGrammarBuilder builder;
  Grammar& g = builder.grammar();
  int32_t root = g.NewRule();
  g.AddAlternative(root, {Element::Token(kSpecialA), Element::Rule(builder.rules().object),
                          Element::Token(kSpecialB)});
  Grammar grammar = std::move(builder).Finish(root);
  for (uint32_t seed = 1; seed <= 3; ++seed) CheckMaskAgainstBruteForce(grammar, seed, 40);

  auto compiled = std::make_shared<CompiledGrammar>(grammar, StressVocabulary(1, 0));
  GrammarMatcher matcher(compiled);
  EXPECT_FALSE(matcher.Accept(kSpecialB));
  EXPECT_TRUE(matcher.Accept(kSpecialA));
  EXPECT_FALSE(matcher.Accept(kSpecialA));
  EXPECT_FALSE(matcher.can_end());
}

TEST(GrammarMatcherTest, EndOnlyWhenComplete) {
  auto grammar = CompileSchema(Json::parse(R"({"type": "integer"})"));
  GrammarMatcher matcher(grammar);
  std::vector<uint32_t> mask(MaskWords(256));
  const std::vector<int32_t> end_ids = {'X'};
  matcher.FillMask(end_ids, mask);
  EXPECT_FALSE(MaskAllows(mask, 'X'));
  EXPECT_TRUE(MaskAllows(mask, '-'));
  EXPECT_FALSE(MaskAllows(mask, 'a'));
  ASSERT_TRUE(matcher.Accept('4'));
  matcher.FillMask(end_ids, mask);
  EXPECT_TRUE(MaskAllows(mask, 'X'));
  EXPECT_TRUE(MaskAllows(mask, '2'));
  EXPECT_FALSE(matcher.Accept('-'));  // a refused token changes nothing
  EXPECT_TRUE(matcher.can_end());
}

TEST(GrammarMatcherTest, WhitespaceIsBounded) {
  auto grammar = CompileSchema(Json::parse(R"({"type": "array"})"));
  GrammarMatcher matcher(grammar);
  ASSERT_TRUE(matcher.Accept('['));
  int spaces = 0;
  while (spaces < 1000 && matcher.Accept(' ')) ++spaces;
  EXPECT_EQ(spaces, kMaxWhitespaceBytes);
  EXPECT_TRUE(matcher.Accept(']'));
  EXPECT_TRUE(matcher.can_end());
}

// Threads asking for one position at once share one build; a failed build is retried.
TEST(PositionCacheTableTest, ConcurrentRequestsShareOneBuild) {
  PositionCacheTable table;
  std::atomic<int> builds{0};
  auto slow_build = [&builds] {
    ++builds;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return PositionCache{{1u}, {}, {}, {}};
  };
  std::vector<std::shared_ptr<const PositionCache>> got(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] { got[i] = table.Get(7, slow_build); });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(builds.load(), 1);
  for (const auto& entry : got) EXPECT_EQ(entry, got[0]);
  auto failing = []() -> PositionCache { throw std::runtime_error("vocabulary walk failed"); };
  EXPECT_THROW(table.Get(8, failing), std::runtime_error);
  EXPECT_EQ(table.Get(8, slow_build)->accepted, std::vector<uint32_t>{1u});  // built again
  EXPECT_EQ(builds.load(), 2);
}

}  // namespace
}  // namespace mkserve::grammar
