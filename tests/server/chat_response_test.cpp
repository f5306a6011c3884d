#include "server/chat_response.h"

#include <gtest/gtest.h>

#include <deque>

#include "server/command4_output_parser.h"

namespace mkserve::server {
namespace {

// Splits an SSE body into its JSON payloads; the last entry is "[DONE]" when present.
std::vector<std::string> Payloads(const std::string& body) {
  std::vector<std::string> payloads;
  size_t start = 0, end;
  while ((end = body.find("\n\n", start)) != std::string::npos) {
    std::string event = body.substr(start, end - start);
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
    payloads.push_back(event.substr(6));
    start = end + 2;
  }
  EXPECT_EQ(start, body.size()) << "trailing bytes after the last event";
  return payloads;
}

ChoiceEvent Tokens(int32_t index, std::string text) {
  TokensEvent event;
  event.text = std::move(text);
  event.token_ids = {1};
  return {index, event};
}

ChoiceEvent Finished(int32_t index, FinishReason reason = FinishReason::kStop) {
  FinishedEvent event;
  event.index = index;
  event.reason = reason;
  return {index, event};
}

ChatOutputOptions Options(bool command4, bool include_usage = false) {
  ChatOutputOptions options;
  if (command4) {
    options.make_parser = [] {
      return std::make_unique<Command4OutputParser>(chat::Command4ParserOptions{});
    };
  }
  options.include_usage = include_usage;
  return options;
}

TEST(ChatResponseTest, StreamFramingRoleContentFinishUsageDone) {
  ChatChoices choices(1, {"chatcmpl-1", 100, "m"}, Options(false, /*include_usage=*/true));
  std::string body = choices.StreamStart() + choices.StreamEvent(Tokens(0, "Hel")) +
                     choices.StreamEvent(Tokens(0, "lo")) + choices.StreamEvent(Finished(0)) +
                     choices.StreamEnd({10, 3, 4});
  std::vector<std::string> payloads = Payloads(body);
  ASSERT_EQ(payloads.size(), 6u);
  Json role = Json::parse(payloads[0]);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(role["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(role["usage"].is_null());
  EXPECT_EQ(Json::parse(payloads[1])["choices"][0]["delta"]["content"], "Hel");
  EXPECT_EQ(Json::parse(payloads[2])["choices"][0]["delta"]["content"], "lo");
  Json finish = Json::parse(payloads[3]);
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(finish["choices"][0]["delta"].empty());
  Json usage = Json::parse(payloads[4]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["prompt_tokens"], 10);
  EXPECT_EQ(usage["usage"]["completion_tokens"], 3);
  EXPECT_EQ(usage["usage"]["total_tokens"], 13);
  EXPECT_EQ(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(payloads[5], "[DONE]");
}

TEST(ChatResponseTest, NoUsageChunkUnlessAsked) {
  ChatChoices choices(1, {"chatcmpl-1", 100, "m"}, Options(false));
  std::vector<std::string> payloads = Payloads(choices.StreamEnd({1, 1, 0}));
  ASSERT_EQ(payloads.size(), 1u);
  EXPECT_EQ(payloads[0], "[DONE]");
}

TEST(ChatResponseTest, Command4ToolCallStreamsAsOpenAiDeltas) {
  ChatChoices choices(1, {"chatcmpl-7", 100, "m"}, Options(true));
  const std::string output =
      "plan<|END_THINKING|><|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"f\", "
      "\"parameters\": {\"a\": [1, 2], \"b\": \"x\"}}]<|END_ACTION|>";
  std::string body;
  // Feed a few characters at a time, as detokenized deltas arrive.
  for (size_t i = 0; i < output.size(); i += 5)
    body += choices.StreamEvent(Tokens(0, output.substr(i, 5)));
  body += choices.StreamEvent(Finished(0));
  std::string reasoning, arguments;
  int named = 0;
  std::string finish_reason;
  for (const std::string& payload : Payloads(body)) {
    Json choice = Json::parse(payload)["choices"][0];
    const Json& delta = choice["delta"];
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"];
    EXPECT_FALSE(delta.contains("content")) << payload;
    for (const Json& call : delta.value("tool_calls", Json::array())) {
      EXPECT_EQ(call["index"], 0);
      if (call["function"].contains("name")) {
        ++named;
        EXPECT_EQ(call["function"]["name"], "f");
        EXPECT_EQ(call["type"], "function");
        EXPECT_FALSE(call["id"].get<std::string>().empty());
      }
      arguments += call["function"].value("arguments", "");
    }
    if (!choice["finish_reason"].is_null()) finish_reason = choice["finish_reason"];
  }
  EXPECT_EQ(reasoning, "plan");
  EXPECT_EQ(named, 1);
  EXPECT_EQ(Json::parse(arguments), Json::parse("{\"a\": [1, 2], \"b\": \"x\"}"));
  EXPECT_EQ(finish_reason, "tool_calls");
}

TEST(ChatResponseTest, NonStreamingMessageHasToolCallsAndNullContent) {
  ChatChoices choices(1, {"chatcmpl-8", 100, "m"}, Options(true));
  choices.Accumulate(Tokens(0,
                            "<|END_THINKING|><|START_ACTION|>[{\"tool_call_id\": \"0\", "
                            "\"tool_name\": \"g\", \"parameters\": {}}]<|END_ACTION|>"));
  choices.Accumulate(Finished(0));
  Json response = choices.FinalResponse({5, 2, 0});
  EXPECT_EQ(response["object"], "chat.completion");
  const Json& message = response["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null());
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "g");
  EXPECT_EQ(Json::parse(message["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            Json::object());
  EXPECT_EQ(response["choices"][0]["finish_reason"], "tool_calls");
}

TEST(ChatResponseTest, AnAbortedChoiceReportsAbortAfterAToolCall) {
  ChatChoices choices(1, {"chatcmpl-7", 100, "m"}, Options(true));
  choices.Accumulate(Tokens(0,
                            "<|END_THINKING|><|START_ACTION|>[{\"tool_call_id\": \"0\", "
                            "\"tool_name\": \"g\", \"parameters\": {}}]<|END_ACTION|>"));
  choices.Accumulate(Finished(0, FinishReason::kAbort));
  Json response = choices.FinalResponse({5, 2, 0});
  EXPECT_EQ(response["choices"][0]["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(response["choices"][0]["finish_reason"], "abort");
}

TEST(ChatResponseTest, LengthWinsOverToolCallsAndChoicesAreIndexed) {
  ChatChoices choices(2, {"chatcmpl-9", 100, "m"}, Options(false));
  choices.Accumulate(Tokens(1, "second"));
  choices.Accumulate(Tokens(0, "first"));
  choices.Accumulate(Finished(0, FinishReason::kLength));
  choices.Accumulate(Finished(1));
  Json response = choices.FinalResponse({1, 2, 0});
  EXPECT_EQ(response["choices"][0]["message"]["content"], "first");
  EXPECT_EQ(response["choices"][1]["message"]["content"], "second");
  EXPECT_EQ(response["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(response["choices"][1]["finish_reason"], "stop");
  EXPECT_EQ(response["choices"][1]["index"], 1);
}

}  // namespace
}  // namespace mkserve::server
