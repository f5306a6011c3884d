#include "server/single_tool_call_parser.h"

#include <gtest/gtest.h>

#include "server/chat_response.h"
#include "server/command4_output_parser.h"

namespace mkserve::server {
namespace {

// Two calls in one action block, as a model answering with parallel calls writes them.
const std::string kParallelOutput =
    "plan<|END_THINKING|><|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"first\", "
    "\"parameters\": {\"city\": \"Oslo\"}}, {\"tool_call_id\": \"1\", \"tool_name\": \"second\", "
    "\"parameters\": {\"x\": 1}}]<|END_ACTION|>";

ChatOutputOptions Options(bool parallel) {
  ChatOutputOptions options;
  options.make_parser = [parallel]() -> std::unique_ptr<OutputParser> {
    auto parser = std::make_unique<Command4OutputParser>(chat::Command4ParserOptions{});
    if (parallel) return parser;
    return std::make_unique<SingleToolCallParser>(std::move(parser));
  };
  return options;
}

ChoiceEvent Tokens(std::string text) {
  TokensEvent event;
  event.text = std::move(text);
  event.token_ids = {1};
  return {0, event};
}

ChoiceEvent Finished() { return {0, FinishedEvent{}}; }

// Streams the output a few characters at a time and returns every chunk's choice object.
std::vector<Json> StreamChoices(ChatChoices& choices, size_t piece) {
  std::string body;
  for (size_t i = 0; i < kParallelOutput.size(); i += piece) {
    body += choices.StreamEvent(Tokens(kParallelOutput.substr(i, piece)));
  }
  body += choices.StreamEvent(Finished());
  std::vector<Json> result;
  size_t start = 0, end;
  while ((end = body.find("\n\n", start)) != std::string::npos) {
    result.push_back(Json::parse(body.substr(start + 6, end - start - 6))["choices"][0]);
    start = end + 2;
  }
  return result;
}

Json NonStreamingMessage(bool parallel) {
  ChatChoices choices(1, {"chatcmpl-p", 1, "m"}, Options(parallel));
  choices.Accumulate(Tokens(kParallelOutput));
  choices.Accumulate(Finished());
  Json response = choices.FinalResponse({1, 1, 0});
  EXPECT_EQ(response["choices"][0]["finish_reason"], "tool_calls");
  return response["choices"][0]["message"];
}

TEST(SingleToolCallParserTest, NonStreamingKeepsOnlyTheFirstCall) {
  // Control: without the filter the same output holds two calls.
  EXPECT_EQ(NonStreamingMessage(/*parallel=*/true)["tool_calls"].size(), 2u);
  Json message = NonStreamingMessage(/*parallel=*/false);
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "first");
  EXPECT_EQ(Json::parse(message["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            Json::parse("{\"city\": \"Oslo\"}"));
  EXPECT_TRUE(message["content"].is_null());
}

TEST(SingleToolCallParserTest, StreamingNeverSendsAPieceOfASecondCall) {
  for (size_t piece : {1u, 3u, 7u, 1000u}) {
    ChatChoices choices(1, {"chatcmpl-q", 1, "m"}, Options(/*parallel=*/false));
    std::string arguments, names, finish_reason;
    for (const Json& choice : StreamChoices(choices, piece)) {
      for (const Json& call : choice["delta"].value("tool_calls", Json::array())) {
        EXPECT_EQ(call["index"], 0) << "piece " << piece;
        if (call["function"].contains("name")) names += call["function"]["name"];
        arguments += call["function"].value("arguments", "");
      }
      EXPECT_FALSE(choice["delta"].contains("content")) << "piece " << piece;
      if (!choice["finish_reason"].is_null()) finish_reason = choice["finish_reason"];
    }
    EXPECT_EQ(names, "first") << "piece " << piece;
    EXPECT_EQ(Json::parse(arguments), Json::parse("{\"city\": \"Oslo\"}")) << "piece " << piece;
    EXPECT_EQ(finish_reason, "tool_calls") << "piece " << piece;
  }
}

}  // namespace
}  // namespace mkserve::server
