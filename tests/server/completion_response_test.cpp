#include "server/completion_response.h"

#include <gtest/gtest.h>

namespace mkserve::server {
namespace {

ChoiceEvent Tokens(int32_t index, std::string text) {
  TokensEvent event;
  event.text = std::move(text);
  return {index, event};
}

ChoiceEvent Finished(int32_t index, FinishReason reason = FinishReason::kLength) {
  FinishedEvent event;
  event.reason = reason;
  return {index, event};
}

TEST(CompletionResponseTest, EchoPrependsPromptAndChoicesFollowPromptTimesN) {
  CompletionOutputOptions options;
  options.n = 2;
  options.echo = true;
  CompletionChoices choices({{"A:", {}}, {"B:", {}}}, {"cmpl-1", 5, "m"}, options);
  choices.Accumulate(Tokens(3, " b1"));
  choices.Accumulate(Tokens(0, " a0"));
  for (int i = 0; i < 4; ++i) choices.Accumulate(Finished(i, FinishReason::kLength));
  Json response = choices.FinalResponse({4, 4, 0});
  ASSERT_EQ(response["choices"].size(), 4u);
  EXPECT_EQ(response["choices"][0]["text"], "A: a0");
  EXPECT_EQ(response["choices"][1]["text"], "A:");
  EXPECT_EQ(response["choices"][2]["text"], "B:");
  EXPECT_EQ(response["choices"][3]["text"], "B: b1");
  EXPECT_EQ(response["choices"][3]["finish_reason"], "length");
  EXPECT_TRUE(response["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(response["object"], "text_completion");
}

TEST(CompletionResponseTest, StreamChunksCarryTextThenFinishThenDone) {
  CompletionOutputOptions options;
  options.include_usage = true;
  CompletionChoices choices({{"p", {}}}, {"cmpl-2", 5, "m"}, options);
  EXPECT_EQ(choices.StreamStart(), "");  // no echo: nothing before the first token
  std::string text_event = choices.StreamEvent(Tokens(0, "hi"));
  Json chunk = Json::parse(text_event.substr(6));
  EXPECT_EQ(chunk["choices"][0]["text"], "hi");
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(chunk["usage"].is_null());
  Json finish = Json::parse(choices.StreamEvent(Finished(0, FinishReason::kStop)).substr(6));
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");
  std::string end = choices.StreamEnd({2, 1, 0});
  EXPECT_NE(end.find("\"choices\":[]"), std::string::npos);
  EXPECT_EQ(end.substr(end.size() - 14), "data: [DONE]\n\n");
}

TEST(CompletionResponseTest, EmptyTokenEventsSendNothing) {
  CompletionChoices choices({{"p", {}}}, {"cmpl-3", 5, "m"}, {});
  EXPECT_EQ(choices.StreamEvent(Tokens(0, "")), "");
}

// One-letter tokens: id i is the letter 'a' + i.
const tokenizer::Tokenizer& Letters() {
  static const tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::FromJsonText(
      R"({"version": "1.0", "added_tokens": [], "normalizer": null, "pre_tokenizer": null,
          "post_processor": null, "decoder": null,
          "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "d": 3}, "merges": []}})");
  return tokenizer;
}

std::vector<PositionLogprobs> Scores(std::vector<std::pair<int32_t, float>> scored) {
  std::vector<PositionLogprobs> positions;
  for (auto [token_id, logprob] : scored) positions.push_back({{token_id, logprob}, {}});
  return positions;
}

ChoiceEvent PromptScores(int32_t index, std::vector<std::pair<int32_t, float>> scored) {
  TokensEvent event;
  event.prompt_logprobs = Scores(std::move(scored));
  return {index, event};
}

ChoiceEvent Scored(int32_t index, std::string text, int32_t token_id, float logprob) {
  TokensEvent event;
  event.text = std::move(text);
  event.token_ids = {token_id};
  event.logprobs = Scores({{token_id, logprob}});
  return {index, event};
}

CompletionOutputOptions EchoLogprobs(int32_t n) {
  CompletionOutputOptions options;
  options.logprob_names.tokenizer = &Letters();
  options.n = n;
  options.echo = true;
  options.logprobs = true;
  return options;
}

// The engine scores a prompt once, for sibling 0, in pieces; sibling 1's own output may arrive
// before those scores do.
std::vector<ChoiceEvent> SiblingEvents(int32_t first) {
  return {Scored(first + 1, "d", 3, -0.5f),
          PromptScores(first, {{1, -1.0f}}),
          PromptScores(first, {{2, -2.0f}}),
          Scored(first, "c", 2, -0.25f),
          Finished(first + 1),
          Finished(first)};
}

void ExpectLogprobs(const Json& logprobs, const std::vector<std::string>& tokens,
                    const Json& token_logprobs) {
  EXPECT_EQ(logprobs["tokens"], Json(tokens));
  EXPECT_EQ(logprobs["token_logprobs"], token_logprobs);
  EXPECT_EQ(logprobs["text_offset"].size(), tokens.size());
  EXPECT_EQ(logprobs["top_logprobs"].size(), tokens.size());
}

// return_tokens_as_token_ids names tokens "token_id:<id>"; a token skip_special_tokens left out
// of the text adds nothing to text_offset, while an echoed prompt's text is whole.
TEST(CompletionResponseTest, TokenIdNamesAndOffsetsOfHiddenTokens) {
  CompletionOutputOptions options = EchoLogprobs(1);
  options.logprob_names.token_ids = true;
  options.hidden_tokens = std::make_shared<const HiddenTokens>(HiddenTokens{false, true});
  CompletionChoices choices({{"ab", {0, 1}}}, {"cmpl-6", 5, "m"}, options);
  for (const ChoiceEvent& event :
       {PromptScores(0, {{1, -1.0f}}), Scored(0, "", 1, -0.5f), Scored(0, "c", 2, -0.25f),
        Scored(0, "", 1, -0.75f), Scored(0, "d", 3, -0.125f), Finished(0)}) {
    choices.Accumulate(event);
  }
  Json response = choices.FinalResponse({2, 4, 0});
  const Json& out = response["choices"][0];
  EXPECT_EQ(out["text"], "abcd");
  ExpectLogprobs(
      out["logprobs"],
      {"token_id:0", "token_id:1", "token_id:1", "token_id:2", "token_id:1", "token_id:3"},
      {nullptr, -1.0, -0.5, -0.25, -0.75, -0.125});
  EXPECT_EQ(out["logprobs"]["text_offset"], Json({0, 1, 2, 2, 3, 3}));
}

// A token the tokenizer added to the prompt's text (a BOS, here 'a') is scored but no part of the
// echoed text: text_offset indexes the text the response carries.
TEST(CompletionResponseTest, OffsetsSkipTokensTheTokenizerAddedToThePrompt) {
  CompletionPrompt prompt{"bc", {0, 1, 2}};
  prompt.added_before = 1;
  CompletionChoices choices({prompt}, {"cmpl-7", 5, "m"}, EchoLogprobs(1));
  for (const ChoiceEvent& event :
       {PromptScores(0, {{1, -1.0f}, {2, -2.0f}}), Scored(0, "d", 3, -0.5f), Finished(0)}) {
    choices.Accumulate(event);
  }
  Json response = choices.FinalResponse({3, 1, 0});
  const Json& out = response["choices"][0];
  EXPECT_EQ(out["text"], "bcd");
  ExpectLogprobs(out["logprobs"], {"a", "b", "c", "d"}, {nullptr, -1.0, -2.0, -0.5});
  EXPECT_EQ(out["logprobs"]["text_offset"], Json({0, 0, 1, 2}));
}

TEST(CompletionResponseTest, EverySiblingEchoesThePromptWithItsLogprobs) {
  CompletionChoices choices({{"abc", {0, 1, 2}}, {"ab", {0, 1}}}, {"cmpl-4", 5, "m"},
                            EchoLogprobs(2));
  for (const ChoiceEvent& event : SiblingEvents(0)) choices.Accumulate(event);
  for (const ChoiceEvent& event :
       {Scored(3, "d", 3, -0.5f), PromptScores(2, {{1, -1.0f}}), Finished(2), Finished(3)}) {
    choices.Accumulate(event);
  }
  Json response = choices.FinalResponse({5, 4, 0});
  const Json& out = response["choices"];
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0]["text"], "abcc");
  ExpectLogprobs(out[0]["logprobs"], {"a", "b", "c", "c"}, {nullptr, -1.0, -2.0, -0.25});
  EXPECT_EQ(out[1]["text"], "abcd");
  ExpectLogprobs(out[1]["logprobs"], {"a", "b", "c", "d"}, {nullptr, -1.0, -2.0, -0.5});
  EXPECT_EQ(out[1]["logprobs"]["text_offset"], Json({0, 1, 2, 3}));
  // The second prompt's siblings get its own scores, not the first prompt's.
  ExpectLogprobs(out[2]["logprobs"], {"a", "b"}, {nullptr, -1.0});
  EXPECT_EQ(out[3]["text"], "abd");
  ExpectLogprobs(out[3]["logprobs"], {"a", "b", "d"}, {nullptr, -1.0, -0.5});
  for (const Json& choice : out) EXPECT_EQ(choice["finish_reason"], "length");
}

TEST(CompletionResponseTest, StreamedSiblingGetsPromptScoresBeforeItsOwnTokens) {
  CompletionChoices choices({{"abc", {0, 1, 2}}}, {"cmpl-5", 5, "m"}, EchoLogprobs(2));
  std::string body = choices.StreamStart();
  for (const ChoiceEvent& event : SiblingEvents(0)) body += choices.StreamEvent(event);
  std::vector<std::string> text(2);
  std::vector<Json> tokens(2, Json::array()), token_logprobs(2, Json::array());
  std::vector<int> finishes(2, 0);
  size_t start = 0, end;
  while ((end = body.find("\n\n", start)) != std::string::npos) {
    Json choice = Json::parse(body.substr(start + 6, end - start - 6))["choices"][0];
    start = end + 2;
    int index = choice["index"];
    text[index] += choice["text"].get<std::string>();
    if (!choice["finish_reason"].is_null()) ++finishes[index];
    if (choice["logprobs"].is_null()) continue;
    for (const Json& token : choice["logprobs"]["tokens"]) tokens[index].push_back(token);
    for (const Json& logprob : choice["logprobs"]["token_logprobs"]) {
      token_logprobs[index].push_back(logprob);
    }
  }
  EXPECT_EQ(text[0], "abcc");
  EXPECT_EQ(text[1], "abcd");
  EXPECT_EQ(tokens[1], Json({"a", "b", "c", "d"}));
  EXPECT_EQ(token_logprobs[0], Json({nullptr, -1.0, -2.0, -0.25}));
  EXPECT_EQ(token_logprobs[1], Json({nullptr, -1.0, -2.0, -0.5}));
  EXPECT_EQ(finishes, (std::vector<int>{1, 1}));
}

}  // namespace
}  // namespace mkserve::server
