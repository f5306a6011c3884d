#include "server/responses_output.h"

#include <gtest/gtest.h>

#include "server/command4_output_parser.h"
#include "server/tiny_tokenizer_for_test.h"

namespace mkserve::server {
namespace {

struct Event {
  std::string name;
  Json data;
};

// Splits a Responses SSE body into its named events, checking the framing.
std::vector<Event> Events(const std::string& body) {
  std::vector<Event> events;
  size_t start = 0, end;
  while ((end = body.find("\n\n", start)) != std::string::npos) {
    const std::string event = body.substr(start, end - start);
    const size_t newline = event.find('\n');
    EXPECT_EQ(event.rfind("event: ", 0), 0u) << event;
    EXPECT_EQ(event.compare(newline + 1, 6, "data: "), 0) << event;
    events.push_back({event.substr(7, newline - 7), Json::parse(event.substr(newline + 7))});
    EXPECT_EQ(events.back().data["type"], events.back().name);
    start = end + 2;
  }
  EXPECT_EQ(start, body.size()) << "trailing bytes after the last event";
  return events;
}

ChoiceEvent Tokens(std::string text, int tokens = 1) {
  TokensEvent event;
  event.text = std::move(text);
  event.token_ids.assign(tokens, 1);
  return {0, event};
}

ChoiceEvent Finished(FinishReason reason = FinishReason::kStop) {
  FinishedEvent event;
  event.reason = reason;
  return {0, event};
}

ResponsesOutput Command4Output() {
  return ResponsesOutput({"resp_ab", 100, "m"}, {{"instructions", nullptr}},
                         std::make_unique<Command4OutputParser>(chat::Command4ParserOptions{}));
}

std::vector<std::string> Names(const std::vector<Event>& events) {
  std::vector<std::string> names;
  for (const Event& event : events) names.push_back(event.name);
  return names;
}

// With reasoning off, text before any marker waits until one (or the end) says whether it is the
// answer: its tokens' logprobs wait with it and come with the answer's text (they were dropped).
// Held text that turns out to be reasoning takes its logprobs along.
TEST(ResponsesOutputTest, HeldTextKeepsItsLogprobs) {
  const auto tokenizer = TinyTokenizerForTest();
  chat::Command4ParserOptions reasoning_off;
  reasoning_off.start = chat::Command4Start::kAnswer;
  for (const bool reasoning : {false, true}) {
    ResponsesOutput output({"resp_ab", 100, "m"}, {{"instructions", nullptr}},
                           std::make_unique<Command4OutputParser>(reasoning_off),
                           LogprobNames{tokenizer.get(), true});
    for (const char* text : {"just ", "text ", "here"}) {
      ChoiceEvent event = Tokens(text);
      std::get<TokensEvent>(event.event).logprobs.push_back({{7, -0.5f}, {}});
      output.Accumulate(event);
    }
    if (reasoning) output.Accumulate(Tokens("<|END_THINKING|><|START_TEXT|>ok<|END_TEXT|>"));
    output.Accumulate(Finished());
    const Json response = output.FinalResponse({});
    const Json& message = response["output"].back();
    ASSERT_EQ(message["type"], "message") << response.dump();
    const Json& part = message["content"][0];
    EXPECT_EQ(part["text"], reasoning ? "ok" : "just text here") << response.dump();
    EXPECT_EQ(part["logprobs"].size(), reasoning ? 0u : 3u) << response.dump();
  }
}

// The answer's logprobs are its text's tokens: not the markers around it (each its own token), and
// not missing the token whose bytes the detokenizer held (no text yet) until the next completed
// the character.
TEST(ResponsesOutputTest, AnswerLogprobsSkipMarkersAndKeepHeldBytes) {
  const auto tokenizer = TinyTokenizerForTest();
  ResponsesOutput output({"resp_ab", 100, "m"}, {{"instructions", nullptr}},
                         std::make_unique<Command4OutputParser>(chat::Command4ParserOptions{}),
                         LogprobNames{tokenizer.get(), true});
  auto token = [&](std::string text, int32_t id) {
    ChoiceEvent event = Tokens(std::move(text));
    auto& tokens = std::get<TokensEvent>(event.event);
    tokens.token_ids = {id};
    tokens.logprobs.push_back({{id, -0.5f}, {}});
    output.Accumulate(event);
  };
  auto marker = [&](const char* text) { token(text, *tokenizer->TokenToId(text)); };
  token("think", 7);
  marker("<|END_THINKING|>");
  marker("<|START_TEXT|>");
  token("", 8);  // the first byte of 'é'
  token("\xc3\xa9 go", 9);
  marker("<|END_TEXT|>");
  marker("<|START_THINKING|>");
  output.Accumulate(Finished());
  const Json response = output.FinalResponse({});
  const Json& part = response["output"].back()["content"][0];
  EXPECT_EQ(part["text"], "\xc3\xa9 go") << response.dump();
  ASSERT_EQ(part["logprobs"].size(), 2u) << response.dump();
  EXPECT_EQ(part["logprobs"][0]["token"], "token_id:8");
  EXPECT_EQ(part["logprobs"][1]["token"], "token_id:9");
}

// A background response cancelled while the parser holds text before any marker (reasoning off):
// the text is in the output it stored, and its tokens are not reasoning tokens.
TEST(ResponsesOutputTest, CancelledResponseKeepsHeldTextAndCountsNoReasoning) {
  chat::Command4ParserOptions reasoning_off;
  reasoning_off.start = chat::Command4Start::kAnswer;
  Json stored;
  ResponsesOutput output({"resp_ab", 100, "m"}, {{"instructions", nullptr}},
                         std::make_unique<Command4OutputParser>(reasoning_off), LogprobNames{},
                         [&](const Json& response) { stored = response; });
  output.StreamStart();
  output.StreamEvent(Tokens("just text", 2));
  const std::string events = output.EndedEarly("cancelled", {5, 2, 0});
  EXPECT_NE(events.find("just text"), std::string::npos) << events;
  ASSERT_EQ(stored["output"].size(), 1u) << stored.dump();
  EXPECT_EQ(stored["output"][0]["content"][0]["text"], "just text") << stored.dump();
  EXPECT_EQ(stored["usage"]["output_tokens_details"]["reasoning_tokens"], 0) << stored.dump();
  EXPECT_EQ(stored["status"], "cancelled");
}

TEST(ResponsesOutputTest, ReasoningThenMessageStreamsInOrder) {
  ResponsesOutput output = Command4Output();
  // One call after another: the operands of + are not evaluated in order.
  std::string body = output.StreamStart();
  body += output.StreamEvent(Tokens("Let me ", 2));
  body += output.StreamEvent(Tokens("think.<|END_THINKING|>", 3));
  body += output.StreamEvent(Tokens("<|START_TEXT|>Hi", 2));
  body += output.StreamEvent(Tokens(" there<|END_TEXT|>", 2));
  body += output.StreamEvent(Finished());
  body += output.StreamEnd({10, 10, 4});
  std::vector<Event> events = Events(body);
  const std::vector<std::string> expected = {"response.created",
                                             "response.in_progress",
                                             "response.output_item.added",
                                             "response.content_part.added",
                                             "response.reasoning_text.delta",
                                             "response.reasoning_text.delta",
                                             "response.reasoning_text.done",
                                             "response.content_part.done",
                                             "response.output_item.done",
                                             "response.output_item.added",
                                             "response.content_part.added",
                                             "response.output_text.delta",
                                             "response.output_text.delta",
                                             "response.output_text.done",
                                             "response.content_part.done",
                                             "response.output_item.done",
                                             "response.completed"};
  EXPECT_EQ(Names(events), expected);
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].data["sequence_number"], i);
  EXPECT_EQ(events[0].data["response"]["status"], "in_progress");
  EXPECT_TRUE(events[0].data["response"]["output"].empty());
  EXPECT_EQ(events[2].data["item"]["id"], "rs_ab_0");
  EXPECT_EQ(events[6].data["text"], "Let me think.");
  EXPECT_EQ(events[9].data["item"]["id"], "msg_ab_1");
  EXPECT_EQ(events[9].data["output_index"], 1);
  EXPECT_EQ(events[13].data["text"], "Hi there");
  const Json& response = events.back().data["response"];
  EXPECT_EQ(response["status"], "completed");
  ASSERT_EQ(response["output"].size(), 2u);
  EXPECT_EQ(response["output"][0]["content"][0]["text"], "Let me think.");
  EXPECT_EQ(response["output"][1]["status"], "completed");
  EXPECT_EQ(response["output"][1]["content"][0]["text"], "Hi there");
  EXPECT_EQ(response["usage"]["input_tokens"], 10);
  EXPECT_EQ(response["usage"]["output_tokens"], 10);
  EXPECT_EQ(response["usage"]["total_tokens"], 20);
  EXPECT_EQ(response["usage"]["input_tokens_details"]["cached_tokens"], 4);
  // The tokens before the answer began: the first two events' five.
  EXPECT_EQ(response["usage"]["output_tokens_details"]["reasoning_tokens"], 5);
  EXPECT_EQ(response, output.FinalResponse({10, 10, 4}));
}

TEST(ResponsesOutputTest, CallsAreItemsOfTheirOwn) {
  ResponsesOutput output = Command4Output();
  output.StreamStart();
  std::string body = output.StreamEvent(
      Tokens("<|END_THINKING|><|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"f\", "
             "\"parameters\": {\"a\": 1}}, {\"tool_call_id\": \"1\", \"tool_name\": \"g\", "
             "\"parameters\": {}}]<|END_ACTION|>"));
  body += output.StreamEvent(Finished());
  body += output.StreamEnd({1, 1, 0});
  std::vector<Event> events = Events(body);
  std::vector<Json> done;
  std::string arguments;
  for (const Event& event : events) {
    if (event.name == "response.output_item.done") done.push_back(event.data["item"]);
    if (event.name == "response.function_call_arguments.delta" && event.data["output_index"] == 0) {
      arguments += event.data["delta"].get<std::string>();
    }
  }
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0]["type"], "function_call");
  EXPECT_EQ(done[0]["name"], "f");
  EXPECT_EQ(Json::parse(done[0]["arguments"].get<std::string>()), Json({{"a", 1}}));
  EXPECT_EQ(arguments, done[0]["arguments"]);
  EXPECT_EQ(done[1]["name"], "g");
  EXPECT_NE(done[0]["call_id"], done[1]["call_id"]);
  EXPECT_EQ(done[0]["id"], "fc_ab_0");
  const Json final = output.FinalResponse({1, 1, 0});
  EXPECT_EQ(final["output"].size(), 2u);
  EXPECT_EQ(final["usage"]["output_tokens_details"]["reasoning_tokens"], 0);  // no reasoning
}

TEST(ResponsesOutputTest, LengthLeavesTheResponseAndItsLastItemIncomplete) {
  ResponsesOutput output({"resp_x", 1, "m"}, Json::object(), nullptr);  // plain text
  output.Accumulate(Tokens("partial"));
  output.Accumulate(Finished(FinishReason::kLength));
  Json response = output.FinalResponse({3, 1, 0});
  EXPECT_EQ(response["status"], "incomplete");
  EXPECT_EQ(response["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(response["output"][0]["status"], "incomplete");
  EXPECT_EQ(response["output"][0]["content"][0]["text"], "partial");
  std::vector<Event> events = Events(output.StreamEnd({3, 1, 0}));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].name, "response.incomplete");

  ResponsesOutput stopped({"resp_y", 1, "m"}, Json::object(), nullptr);
  stopped.Accumulate(Finished(FinishReason::kAbort));
  response = stopped.FinalResponse({3, 0, 0});
  EXPECT_EQ(response["incomplete_details"]["reason"], "interrupted");
  EXPECT_TRUE(response["output"].empty());
}

TEST(ResponsesOutputTest, TheRequestsSettingsAreEchoed) {
  ResponsesOutput output({"resp_z", 5, "m"}, {{"instructions", "be brief"}, {"top_p", 0.5}},
                         nullptr);
  output.Accumulate(Finished());
  Json response = output.FinalResponse({1, 0, 0});
  EXPECT_EQ(response["instructions"], "be brief");
  EXPECT_EQ(response["top_p"], 0.5);
  EXPECT_EQ(response["object"], "response");
  EXPECT_EQ(response["created_at"], 5);
  EXPECT_EQ(response["store"], false);
}

}  // namespace
}  // namespace mkserve::server
