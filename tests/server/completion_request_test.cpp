#include "server/completion_request.h"

#include <gtest/gtest.h>

#include "server/api_error_matcher.h"
#include "server/generation_request.h"

namespace mkserve::server {
namespace {

CompletionRequest ParseWithPrompt(const Json& prompt) {
  return ParseCompletionRequest({{"model", "m"}, {"prompt", prompt}});
}

TEST(CompletionRequestTest, PromptInAllFourForms) {
  CompletionRequest text = ParseWithPrompt("hello");
  ASSERT_EQ(text.prompts.size(), 1u);
  EXPECT_FALSE(text.prompts[0].is_tokens);
  EXPECT_EQ(text.prompts[0].text, "hello");

  CompletionRequest texts = ParseWithPrompt({"a", "b"});
  ASSERT_EQ(texts.prompts.size(), 2u);
  EXPECT_EQ(texts.prompts[1].text, "b");

  CompletionRequest ids = ParseWithPrompt({1, 2, 3});
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_TRUE(ids.prompts[0].is_tokens);
  EXPECT_EQ(ids.prompts[0].token_ids, (std::vector<int32_t>{1, 2, 3}));

  CompletionRequest id_lists = ParseWithPrompt({{1, 2}, {3}});
  ASSERT_EQ(id_lists.prompts.size(), 2u);
  EXPECT_EQ(id_lists.prompts[1].token_ids, (std::vector<int32_t>{3}));
}

TEST(CompletionRequestTest, MixedOrBadPromptsNameTheElement) {
  EXPECT_EQ(ExpectApiError([] { ParseWithPrompt({"a", 1}); }).param(), "prompt[1]");
  EXPECT_EQ(ExpectApiError([] { ParseWithPrompt({1, -2}); }).param(), "prompt[1]");
  EXPECT_EQ(ExpectApiError([] { ParseWithPrompt({{1}, {}}); }).param(), "prompt[1]");
  EXPECT_EQ(ExpectApiError([] { ParseWithPrompt(Json::array()); }).param(), "prompt");
  EXPECT_EQ(ExpectApiError([] { ParseWithPrompt(42); }).param(), "prompt");
  EXPECT_EQ(ExpectApiError([] { ParseCompletionRequest({{"model", "m"}}); }).param(), "prompt");
}

TEST(CompletionRequestTest, LogprobsIsAnIntegerAndEchoAddsPromptLogprobs) {
  CompletionRequest request =
      ParseCompletionRequest({{"prompt", "x"}, {"logprobs", 3}, {"echo", true}, {"max_tokens", 0}});
  EXPECT_EQ(request.generation.sampling.num_logprobs, 3);
  EXPECT_EQ(request.generation.sampling.num_prompt_logprobs, 3);
  EXPECT_EQ(request.generation.sampling.max_tokens, 0);
  EXPECT_EQ(ExpectApiError([] {
              ParseCompletionRequest({{"prompt", "x"}, {"logprobs", true}});
            }).param(),
            "logprobs");
  EXPECT_EQ(ExpectApiError([] {
              ParseCompletionRequest({{"prompt", "x"}, {"logprobs", 21}});
            }).param(),
            "logprobs");
}

TEST(CompletionRequestTest, DefaultMaxTokensIsSixteen) {
  CompletionRequest request = ParseWithPrompt("x");
  EXPECT_FALSE(request.generation.has_max_tokens);
  EXPECT_EQ(request.generation.sampling.max_tokens, 16);
}

TEST(CompletionRequestTest, StopAsListOfStrings) {
  CompletionRequest request = ParseCompletionRequest({{"prompt", "x"}, {"stop", {"a", "bc"}}});
  EXPECT_EQ(request.generation.sampling.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(ExpectApiError([] {
              ParseCompletionRequest({{"prompt", "x"}, {"stop", {"a", ""}}});
            }).param(),
            "stop[1]");
}

TEST(TokenizeRequestTest, PromptOrMessages) {
  EXPECT_EQ(ParseTokenizeRequest({{"prompt", "hi"}}).prompt, "hi");
  TokenizeRequest chat =
      ParseTokenizeRequest({{"messages", {{{"role", "user"}, {"content", "x"}}}}});
  ASSERT_TRUE(chat.chat);
  EXPECT_EQ(chat.chat->messages.size(), 1u);
  EXPECT_EQ(ExpectApiError([] { ParseTokenizeRequest({{"prompt", 3}}); }).param(), "prompt");
  // Both forms at once is ambiguous, not a silent choice.
  EXPECT_EQ(ExpectApiError([] {
              ParseTokenizeRequest(
                  {{"prompt", "hi"}, {"messages", {{{"role", "user"}, {"content", "x"}}}}});
            }).param(),
            "prompt");
  EXPECT_EQ(ParseDetokenizeRequest({{"tokens", {5, 6}}}).token_ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(ExpectApiError([] {
              ParseDetokenizeRequest({{"tokens", {5, "a"}}});
            }).param(),
            "tokens[1]");
}

// /tokenize counts the prompt the chat endpoint would build, so it reads the same fields.
TEST(TokenizeRequestTest, MessagesTakeEveryPromptShapingField) {
  Json body = {
      {"messages", {{{"role", "user"}, {"content", "x"}}}},
      {"tools",
       {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", Json::object()}}}}}},
      {"tool_choice", "none"},
      {"chat_template_kwargs", {{"platform_instruction_override", "p"}}},
      {"reasoning_effort", "none"}};
  TokenizeRequest request = ParseTokenizeRequest(body);
  ASSERT_TRUE(request.chat);
  ASSERT_EQ(request.chat->tools.size(), 1u);
  EXPECT_EQ(request.chat->tool_choice.mode, ToolChoice::Mode::kNone);
  EXPECT_EQ(request.chat->chat_template_kwargs["platform_instruction_override"], "p");
  EXPECT_EQ(request.chat->enable_thinking, false);
}

// The same vLLM extensions are refused on /v1/completions (the shared parse), where echo is an
// OpenAI field and honoured.
TEST(CompletionRequestTest, UnhonouredVllmFieldsAreRefusedByName) {
  for (auto [name, value] :
       std::vector<std::pair<std::string, Json>>{{"guided_regex", "[a-z]+"},
                                                 {"use_beam_search", true},
                                                 {"prompt_logprobs", 2},
                                                 {"truncate_prompt_tokens", 5}}) {
    Json body = {{"prompt", "x"}, {name, value}};
    ApiError error = ExpectApiError([&] { ParseCompletionRequest(body); });
    EXPECT_EQ(error.param(), name) << name << "=" << value;
  }
  EXPECT_TRUE(ParseCompletionRequest({{"prompt", "x"}, {"echo", true}}).echo);
}

// Implemented vLLM switches: off unless sent true; anything but a boolean names the field.
TEST(CompletionRequestTest, SpecialTokenAndTokenIdSwitches) {
  GenerationRequest plain = ParseCompletionRequest({{"prompt", "x"}}).generation;
  EXPECT_FALSE(plain.skip_special_tokens);
  EXPECT_FALSE(plain.tokens_as_ids);
  GenerationRequest both =
      ParseCompletionRequest(
          {{"prompt", "x"}, {"skip_special_tokens", true}, {"return_tokens_as_token_ids", true}})
          .generation;
  EXPECT_TRUE(both.skip_special_tokens);
  EXPECT_TRUE(both.tokens_as_ids);
  for (const char* name :
       {"skip_special_tokens", "return_tokens_as_token_ids", "add_special_tokens"}) {
    for (const Json& bad : {Json(1), Json("10"), Json::object()}) {
      ApiError error = ExpectApiError([&] {
        ParseCompletionRequest({{"prompt", "x"}, {name, bad}});
      });
      EXPECT_EQ(error.param(), name);
    }
  }
  // add_special_tokens (the tokenizer's BOS before a text prompt) is on unless sent false.
  EXPECT_TRUE(ParseCompletionRequest({{"prompt", "x"}}).add_special_tokens);
  EXPECT_FALSE(
      ParseCompletionRequest({{"prompt", "x"}, {"add_special_tokens", false}}).add_special_tokens);
}

TEST(CompletionRequestTest, BestOfMustEqualN) {
  Json body = {{"prompt", "p"}, {"n", 2}, {"best_of", 2}};
  EXPECT_EQ(ParseCompletionRequest(body).generation.n, 2);
  body["best_of"] = 3;
  ApiError error = ExpectApiError([&] { ParseCompletionRequest(body); });
  EXPECT_EQ(error.param(), "best_of");
}

// One request may queue at most kMaxRequestChoices sequences (prompts x n): a prompt list of
// 50000 with n 16 would otherwise hold the engine for everyone.
TEST(CompletionRequestTest, PromptsTimesNIsBounded) {
  Json body = {{"prompt", Json::array()}, {"n", 1}};
  for (int64_t i = 0; i < kMaxRequestChoices; ++i) body["prompt"].push_back("p");
  EXPECT_EQ(static_cast<int64_t>(ParseCompletionRequest(body).prompts.size()), kMaxRequestChoices);
  body["n"] = 2;
  ApiError error = ExpectApiError([&] { ParseCompletionRequest(body); });
  EXPECT_EQ(error.param(), "prompt");
  EXPECT_NE(std::string(error.what()).find("x 2"), std::string::npos) << error.what();
  body["n"] = 1;
  body["prompt"].push_back("p");
  EXPECT_EQ(ExpectApiError([&] { ParseCompletionRequest(body); }).param(), "prompt");
}

}  // namespace
}  // namespace mkserve::server
