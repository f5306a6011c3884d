#include "engine/stop_checker.h"

#include <gtest/gtest.h>

#include <utility>

#include "engine/fake_text_decoder.h"

namespace mkserve {
namespace {

// Token ids: 0 "Hel", 1 "lo", 2 " wor", 3 "ld", 4 "<e", 5 "nd>", 6 "!", 7 "<", 8 "x", 9 EOS
const testing::FakeTextDecoder kDecoder({"Hel", "lo", " wor", "ld", "<e", "nd>", "!", "<", "x",
                                         ""});
constexpr int32_t kEos = 9;

struct Outcome {
  std::string text;
  FinishReason finish = FinishReason::kNone;
  std::vector<int32_t> emitted;
  std::string stop_string;
};

Outcome Feed(const SamplingParams& params, const std::vector<int32_t>& tokens,
             int64_t max_model_len = 1000, int64_t num_prompt_tokens = 5) {
  std::vector<int32_t> eos = {kEos};
  StopChecker checker(params, eos, max_model_len, kDecoder.NewStream({}, nullptr));
  Outcome run;
  for (size_t i = 0; i < tokens.size() && run.finish == FinishReason::kNone; ++i) {
    StopOutcome out = checker.Append(tokens[i], i + 1, num_prompt_tokens + i + 1);
    run.text += out.text;
    run.finish = out.finish;
    run.stop_string = out.stop_string;
    if (out.emit_token) run.emitted.push_back(tokens[i]);
  }
  return run;
}

SamplingParams Params(std::vector<std::string> stop = {}, int32_t max_tokens = 100) {
  SamplingParams params;
  params.stop = std::move(stop);
  params.max_tokens = max_tokens;
  return params;
}

TEST(StopCheckerTest, EosStopsAndIsNotEmitted) {
  Outcome run = Feed(Params(), {0, 1, kEos, 2});
  EXPECT_EQ(run.text, "Hello");
  EXPECT_EQ(run.finish, FinishReason::kStop);
  EXPECT_EQ(run.emitted, (std::vector<int32_t>{0, 1}));
}

TEST(StopCheckerTest, IgnoreEosKeepsGoingUntilMaxTokens) {
  SamplingParams params = Params({}, 4);
  params.ignore_eos = true;
  Outcome run = Feed(params, {0, kEos, 1, 6, 2});
  EXPECT_EQ(run.finish, FinishReason::kLength);
  EXPECT_EQ(run.text, "Hello!");
  EXPECT_EQ(run.emitted.size(), 4u);
}

TEST(StopCheckerTest, StopTokenIdsStop) {
  SamplingParams params = Params();
  params.stop_token_ids = {6};
  Outcome run = Feed(params, {0, 6, 1});
  EXPECT_EQ(run.text, "Hel");
  EXPECT_EQ(run.finish, FinishReason::kStop);
}

TEST(StopCheckerTest, StopStringAcrossTokensIsNeverEmitted) {
  Outcome run = Feed(Params({"<end>"}), {0, 1, 4, 5, 6});
  EXPECT_EQ(run.text, "Hello");
  EXPECT_EQ(run.finish, FinishReason::kStop);
  EXPECT_EQ(run.stop_string, "<end>");
}

TEST(StopCheckerTest, TextThatMightStartAStopStringIsWithheldUntilDecided) {
  std::vector<int32_t> eos = {kEos};
  SamplingParams params = Params({"<end>"});
  StopChecker checker(params, eos, 1000, kDecoder.NewStream({}, nullptr));
  EXPECT_EQ(checker.Append(0, 1, 6).text, "Hel");
  EXPECT_EQ(checker.Append(7, 2, 7).text, "");    // "<" could start "<end>"
  EXPECT_EQ(checker.Append(8, 3, 8).text, "<x");  // "<x" cannot: released
  EXPECT_EQ(checker.Append(4, 4, 9).text, "");    // "<e" withheld
  StopOutcome out = checker.Append(6, 5, 10);
  EXPECT_EQ(out.text, "<e!");
  EXPECT_EQ(out.finish, FinishReason::kNone);
}

TEST(StopCheckerTest, EarliestOfSeveralStopStringsWins) {
  Outcome run = Feed(Params({"ld", "lo wor"}), {0, 1, 2, 3});
  EXPECT_EQ(run.text, "Hel");
  EXPECT_EQ(run.stop_string, "lo wor");
}

// include_stop_str_in_output: the text ends with the match, still nothing after it.
TEST(StopCheckerTest, IncludedStopStringEndsTheText) {
  SamplingParams params = Params({"<end>"});
  params.include_stop_str_in_output = true;
  Outcome run = Feed(params, {0, 1, 4, 5, 6});
  EXPECT_EQ(run.text, "Hello<end>");
  EXPECT_EQ(run.finish, FinishReason::kStop);
  EXPECT_EQ(run.stop_string, "<end>");
  // Matched inside one token's text: what follows the match in that token is dropped.
  params.stop = {"wo"};
  run = Feed(params, {0, 1, 2, 3});
  EXPECT_EQ(run.text, "Hello wo");
  // The earliest match wins, and a match in the text released at the length limit is kept too.
  params.stop = {"ld", "lo wor"};
  run = Feed(params, {0, 1, 2, 3});
  EXPECT_EQ(run.text, "Hello wor");
  params.stop = {"<end>"};
  params.max_tokens = 4;
  run = Feed(params, {0, 1, 4, 5});
  EXPECT_EQ(run.text, "Hello<end>");
  EXPECT_EQ(run.finish, FinishReason::kStop);
}

TEST(StopCheckerTest, LengthReleasesWithheldText) {
  Outcome run = Feed(Params({"<end>"}, 2), {0, 4});
  EXPECT_EQ(run.finish, FinishReason::kLength);
  EXPECT_EQ(run.text, "Hel<e");
}

TEST(StopCheckerTest, ContextLimitEndsWithLength) {
  Outcome run = Feed(Params(), {0, 1, 2, 3}, /*max_model_len=*/7, /*num_prompt_tokens=*/5);
  EXPECT_EQ(run.finish, FinishReason::kLength);
  EXPECT_EQ(run.text, "Hello");
}

TEST(StopCheckerTest, MinTokensDefersEveryStop) {
  SamplingParams params = Params({"lo"});
  params.min_tokens = 4;
  // The early EOS is an ordinary token and "lo" is released unchecked; the fourth token stops.
  Outcome run = Feed(params, {0, kEos, 1, kEos, 2});
  EXPECT_EQ(run.text, "Hello");
  EXPECT_EQ(run.emitted, (std::vector<int32_t>{0, kEos, 1}));
  EXPECT_EQ(run.finish, FinishReason::kStop);
}

// A decoder that holds every piece back until Flush, as the detokenizer holds an incomplete
// UTF-8 sequence and releases it as U+FFFD at the end.
class HoldingStream : public TokenTextStream {
 public:
  TokenText Append(int32_t) override {
    held_ += "\xEF\xBF\xBD";
    return {};
  }
  std::string Flush() override { return std::exchange(held_, {}); }

 private:
  std::string held_;
};

TEST(StopCheckerTest, TextTheDecoderReleasesAtTheLengthLimitIsChecked) {
  SamplingParams params = Params({"\xEF\xBF\xBD\xEF\xBF\xBD"}, 3);
  std::vector<int32_t> eos = {kEos};
  StopChecker checker(params, eos, 1000, std::make_unique<HoldingStream>());
  EXPECT_EQ(checker.Append(0, 1, 6).text, "");
  EXPECT_EQ(checker.Append(0, 2, 7).text, "");
  StopOutcome last = checker.Append(0, 3, 8);
  EXPECT_EQ(last.text, "");
  EXPECT_EQ(last.finish, FinishReason::kStop);
  EXPECT_EQ(last.stop_string, params.stop[0]);
}

TEST(StopCheckerTest, TextReleasedByFlushIsCheckedToo) {
  SamplingParams params = Params({"\xEF\xBF\xBD"}, 10);
  std::vector<int32_t> eos = {kEos};
  StopChecker checker(params, eos, 1000, std::make_unique<HoldingStream>());
  EXPECT_EQ(checker.Append(0, 1, 6).text, "");
  std::string matched;
  EXPECT_EQ(checker.Flush(&matched), "");
  EXPECT_EQ(matched, params.stop[0]);
}

// A stop token releases the decoder's tail; a stop string in it is named, as at the length limit.
TEST(StopCheckerTest, AStopTokenNamesTheStopStringItsReleasedTextHeld) {
  SamplingParams params = Params({"\xEF\xBF\xBD"}, 10);
  std::vector<int32_t> eos = {kEos};
  StopChecker checker(params, eos, 1000, std::make_unique<HoldingStream>());
  EXPECT_EQ(checker.Append(0, 1, 6).text, "");
  StopOutcome last = checker.Append(kEos, 2, 7);
  EXPECT_EQ(last.text, "");
  EXPECT_EQ(last.finish, FinishReason::kStop);
  EXPECT_EQ(last.stop_string, params.stop[0]);
}

// Ids 0 "a ", 1 "<|START_TEXT|>" and 3 "<|END_TEXT|>" (whole tokens, as chat's markers), 2 "TEXT",
// 4 "|>", 5 "b".
const testing::FakeTextDecoder kMarkerDecoder({"a ", "<|START_TEXT|>", "TEXT", "<|END_TEXT|>", "|>",
                                               "b"},
                                              {1, 3});

Outcome FeedMarkers(const SamplingParams& params, const std::vector<int32_t>& tokens) {
  std::vector<int32_t> eos = {kEos};
  StopChecker checker(params, eos, 1000, kMarkerDecoder.NewStream({}, nullptr));
  Outcome run;
  for (size_t i = 0; i < tokens.size() && run.finish == FinishReason::kNone; ++i) {
    StopOutcome out = checker.Append(tokens[i], i + 1, i + 6);
    run.text += out.text;
    run.finish = out.finish;
    run.stop_string = out.stop_string;
  }
  return run;
}

TEST(StopCheckerTest, AStopStringNeverCutsAMarkerInTwo) {
  Outcome run = FeedMarkers(Params({"TEXT"}), {1, 0, 2, 0});
  EXPECT_EQ(run.text, "<|START_TEXT|>a ");  // the marker's "TEXT" is not a match
  EXPECT_EQ(run.finish, FinishReason::kStop);
  // Across a marker's edge: no match at all.
  run = FeedMarkers(Params({"|>a", "T|"}), {1, 0, 3, 5});
  EXPECT_EQ(run.text, "<|START_TEXT|>a <|END_TEXT|>b");
  EXPECT_EQ(run.finish, FinishReason::kNone);
  // Ordinary tokens still match across their edges: "|>" then "b".
  run = FeedMarkers(Params({"|>b"}), {0, 4, 5});
  EXPECT_EQ(run.text, "a ");
  EXPECT_EQ(run.finish, FinishReason::kStop);
}

TEST(StopCheckerTest, AStopStringMatchesWholeMarkers) {
  Outcome run = FeedMarkers(Params({"<|END_TEXT|>"}), {0, 3, 5});
  EXPECT_EQ(run.text, "a ");
  EXPECT_EQ(run.stop_string, "<|END_TEXT|>");
  run = FeedMarkers(Params({"a <|END_TEXT|>b"}), {0, 3, 5});
  EXPECT_EQ(run.text, "");
  EXPECT_EQ(run.finish, FinishReason::kStop);
}

// Text is withheld only while a match that keeps markers whole could still come: a stop string
// that would start inside the marker does not hold it back.
TEST(StopCheckerTest, AMarkersTailIsNotWithheld) {
  std::vector<int32_t> eos = {kEos};
  SamplingParams params = Params({"TEXT|>b", "<|START_TEXT|>a"});
  StopChecker checker(params, eos, 1000, kMarkerDecoder.NewStream({}, nullptr));
  EXPECT_EQ(checker.Append(0, 1, 6).text, "a ");
  EXPECT_EQ(checker.Append(3, 2, 7).text, "<|END_TEXT|>");
  EXPECT_EQ(checker.Append(1, 3, 8).text, "");  // may start "<|START_TEXT|>a"
  StopOutcome out = checker.Append(0, 4, 9);
  EXPECT_EQ(out.text, "");
  EXPECT_EQ(out.finish, FinishReason::kStop);
}

}  // namespace
}  // namespace mkserve
