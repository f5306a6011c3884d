#include "server/completion_response.h"

#include <gtest/gtest.h>

namespace mkserve::server {
namespace {

ChoiceEvent Tokens(int32_t index, std::string text) {
  TokensEvent event;
  event.text = std::move(text);
  return {index, event};
}

ChoiceEvent Finished(int32_t index, FinishReason reason) {
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

}  // namespace
}  // namespace mkserve::server
