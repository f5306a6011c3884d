#include "server/responses_request.h"

#include <gtest/gtest.h>

#include "server/api_error_matcher.h"

namespace mkserve::server {
namespace {

TEST(ResponsesRequestTest, StringInputAndInstructionsBecomeSystemAndUserMessages) {
  ResponsesRequest request = ParseResponsesRequest(
      {{"input", "hello"}, {"instructions", "be brief"}, {"max_output_tokens", 7}});
  const ChatRequest& chat = request.chat;
  ASSERT_EQ(chat.messages.size(), 2u);
  EXPECT_EQ(chat.messages[0].role, "system");
  EXPECT_EQ(chat.messages[0].content, "be brief");
  EXPECT_EQ(chat.messages[1].role, "user");
  EXPECT_EQ(chat.messages[1].content, "hello");
  EXPECT_EQ(chat.generation.sampling.max_tokens, 7);
  EXPECT_TRUE(chat.generation.has_max_tokens);
  EXPECT_EQ(request.echo["instructions"], "be brief");
  EXPECT_EQ(request.echo["max_output_tokens"], 7);
  EXPECT_EQ(request.echo["tool_choice"], "none");
  EXPECT_EQ(request.echo["text"]["format"]["type"], "text");
}

// Consecutive assistant-side items (reasoning, assistant text, calls) are one assistant turn, as
// the template renders a turn; outputs are tool messages.
TEST(ResponsesRequestTest, AssistantSideItemsMakeOneTurn) {
  Json input = Json::array(
      {{{"role", "user"},
        {"content",
         {{{"type", "input_text"}, {"text", "a"}}, {{"type", "input_text"}, {"text", "b"}}}}},
       {{"type", "reasoning"}, {"summary", {{{"type", "summary_text"}, {"text", "short"}}}}},
       {{"type", "message"},
        {"role", "assistant"},
        {"content", {{{"type", "output_text"}, {"text", "I'll look."}}}}},
       {{"type", "function_call"}, {"call_id", "c1"}, {"name", "f"}, {"arguments", "{\"x\":1}"}},
       {{"type", "function_call"}, {"call_id", "c2"}, {"name", "g"}},
       {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "one"}},
       {{"type", "function_call_output"},
        {"call_id", "c2"},
        {"output", {{{"type", "input_text"}, {"text", "two"}}}}},
       {{"type", "reasoning"},
        {"content", {{{"type", "reasoning_text"}, {"text", "full"}}}},
        {"summary", {{{"type", "summary_text"}, {"text", "ignored"}}}}},
       {{"role", "assistant"}, {"content", "done"}},
       {{"role", "developer"}, {"content", "dev"}}});
  ResponsesRequest request = ParseResponsesRequest({{"input", input}});
  const std::vector<ChatMessage>& m = request.chat.messages;
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0].role, "user");
  EXPECT_EQ(m[0].content, "ab");
  EXPECT_EQ(m[1].role, "assistant");
  EXPECT_EQ(m[1].reasoning_content, "short");
  EXPECT_EQ(m[1].content, "I'll look.");
  ASSERT_EQ(m[1].tool_calls.size(), 2u);
  EXPECT_EQ(m[1].tool_calls[0].id, "c1");
  EXPECT_EQ(m[1].tool_calls[0].arguments, "{\"x\":1}");
  EXPECT_EQ(m[1].tool_calls[1].arguments, "{}");
  EXPECT_EQ(m[2].role, "tool");
  EXPECT_EQ(m[2].tool_call_id, "c1");
  EXPECT_EQ(m[3].content, "two");
  EXPECT_EQ(m[4].role, "assistant");
  EXPECT_EQ(m[4].reasoning_content, "full");  // content wins over the summary
  EXPECT_EQ(m[4].content, "done");
  EXPECT_EQ(m[5].role, "developer");
}

// previous_response_id: the stored context comes after the new instructions and before the
// input, and a tool result in the input may answer a call of the context; the request's own
// items (a string as one user message) are what it stores.
TEST(ResponsesRequestTest, ContextOfAPreviousResponseComesBeforeTheInput) {
  const Json context = Json::array(
      {{{"type", "message"}, {"role", "user"}, {"content", "weather?"}},
       {{"type", "reasoning"}, {"content", {{{"type", "reasoning_text"}, {"text", "call it"}}}}},
       {{"type", "function_call"}, {"call_id", "c1"}, {"name", "f"}, {"arguments", "{}"}}});
  const Json body = {
      {"instructions", "new rules"},
      {"previous_response_id", "resp_1"},
      {"input",
       Json::array({{{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "sun"}}})}};
  EXPECT_EQ(PreviousResponseId(body), "resp_1");
  ResponsesRequest request = ParseResponsesRequest(body, context);
  const std::vector<ChatMessage>& m = request.chat.messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].content, "new rules");
  EXPECT_EQ(m[1].content, "weather?");
  EXPECT_EQ(m[2].reasoning_content, "call it");
  ASSERT_EQ(m[2].tool_calls.size(), 1u);
  EXPECT_EQ(m[3].role, "tool");
  EXPECT_EQ(request.input_items, body["input"]);
  EXPECT_TRUE(request.store);
  EXPECT_EQ(request.echo["previous_response_id"], "resp_1");
  // Without the context the same tool result answers no call.
  EXPECT_EQ(ExpectApiError([&] { ParseResponsesRequest(body); }).param(), "input[0].call_id");

  // A conversation's context is named as the conversation's.
  const Json orphan =
      Json::array({{{"type", "function_call_output"}, {"call_id", "nope"}, {"output", "x"}}});
  EXPECT_EQ(ExpectApiError([&] {
              ParseResponsesRequest({{"conversation", "conv_1"}, {"input", "hi"}}, orphan);
            }).param(),
            "conversation.items[0].call_id");

  // An input item of an id the conversation holds (or named twice) would be stored twice.
  const Json held =
      Json::array({{{"type", "message"}, {"role", "user"}, {"content", "a"}, {"id", "msg_1"}}});
  const Json again = {{"conversation", "conv_1"}, {"input", held}};
  EXPECT_EQ(ExpectApiError([&] { ParseResponsesRequest(again, held); }).param(), "input[0].id");
  const Json twice = {{"conversation", "conv_1"}, {"input", {held[0], held[0]}}};
  EXPECT_EQ(ExpectApiError([&] { ParseResponsesRequest(twice); }).param(), "input[1].id");
  ParseResponsesRequest({{"conversation", "conv_1"}, {"input", held}});

  ResponsesRequest plain = ParseResponsesRequest({{"input", "hi"}, {"store", false}});
  EXPECT_EQ(plain.input_items,
            Json::array({{{"type", "message"}, {"role", "user"}, {"content", "hi"}}}));
  EXPECT_FALSE(plain.store);
  EXPECT_FALSE(plain.background);
  EXPECT_EQ(plain.echo["background"], false);
  ResponsesRequest background = ParseResponsesRequest({{"input", "hi"}, {"background", true}});
  EXPECT_TRUE(background.background);
  EXPECT_EQ(background.echo["background"], true);
  for (const Json& conversation : {Json("conv_1"), Json{{"id", "conv_1"}}}) {
    ResponsesRequest in = ParseResponsesRequest({{"input", "hi"}, {"conversation", conversation}});
    EXPECT_EQ(in.conversation_id, "conv_1");
    EXPECT_EQ(in.echo["conversation"], (Json{{"id", "conv_1"}}));
  }
  EXPECT_EQ(plain.conversation_id, "");
  EXPECT_TRUE(plain.echo["conversation"].is_null());
  EXPECT_EQ(PreviousResponseId({{"input", "hi"}}), std::nullopt);
  EXPECT_EQ(ExpectApiError([] {
              PreviousResponseId({{"previous_response_id", ""}});
            }).param(),
            "previous_response_id");
}

TEST(ResponsesRequestTest, FlatToolsToolChoiceFormatAndEffort) {
  Json body = {
      {"input", "x"},
      {"tools",
       {{{"type", "function"},
         {"name", "f"},
         {"description", "d"},
         {"parameters", {{"type", "object"}}},
         {"strict", true}}}},
      {"tool_choice", {{"type", "function"}, {"name", "f"}}},
      {"text",
       {{"format", {{"type", "json_schema"}, {"name", "s"}, {"schema", {{"type", "object"}}}}}}},
      {"reasoning", {{"effort", "none"}}},
      {"temperature", 0.25},
      {"parallel_tool_calls", false}};
  ResponsesRequest request = ParseResponsesRequest(body);
  const ChatRequest& chat = request.chat;
  ASSERT_EQ(chat.tools.size(), 1u);
  EXPECT_EQ(chat.tools[0].name, "f");
  EXPECT_EQ(chat.tools[0].description, "d");
  EXPECT_EQ(chat.tools[0].parameters_param, "tools[0].parameters");
  EXPECT_EQ(chat.tool_choice.mode, ToolChoice::Mode::kNamed);
  EXPECT_EQ(chat.tool_choice.name, "f");
  EXPECT_EQ(chat.response_format.type, ResponseFormat::Type::kJsonSchema);
  EXPECT_EQ(chat.response_format.schema_param, "text.format.schema");
  EXPECT_EQ(chat.enable_thinking, false);
  EXPECT_FALSE(chat.parallel_tool_calls);
  EXPECT_FLOAT_EQ(chat.generation.sampling.temperature, 0.25f);
  EXPECT_EQ(request.echo["tools"], body["tools"]);
  EXPECT_EQ(request.echo["tool_choice"], body["tool_choice"]);
  EXPECT_EQ(request.echo["text"]["format"]["name"], "s");
  EXPECT_EQ(request.echo["reasoning"]["effort"], "none");
  EXPECT_EQ(request.echo["parallel_tool_calls"], false);
  EXPECT_FALSE(chat.logprobs);

  body["include"] = {"reasoning.encrypted_content", "message.output_text.logprobs"};
  body["top_logprobs"] = 5;
  request = ParseResponsesRequest(body);
  EXPECT_TRUE(request.chat.logprobs);
  EXPECT_EQ(request.chat.generation.sampling.num_logprobs, 5);
  EXPECT_EQ(request.echo["top_logprobs"], 5);

  body["reasoning"] = {{"effort", "high"}};
  body["text"] = {{"format", {{"type", "json_object"}}}};
  body["tool_choice"] = "required";
  request = ParseResponsesRequest(body);
  EXPECT_EQ(request.chat.enable_thinking, true);
  EXPECT_EQ(request.chat.response_format.type, ResponseFormat::Type::kJsonObject);
  EXPECT_EQ(request.chat.tool_choice.mode, ToolChoice::Mode::kRequired);
}

TEST(ResponsesRequestTest, BadInputIsRefusedNamingTheField) {
  const Json tool = {{"type", "function"}, {"name", "f"}};
  const std::vector<std::pair<Json, std::string>> cases = {
      {{{"instructions", "x"}}, "input"},
      {{{"input", 3}}, "input"},
      {{{"input", Json::array()}}, "input"},
      {{{"input", {{{"role", "tool"}, {"content", "x"}}}}}, "input[0].role"},
      {{{"input", {{{"role", "user"}}}}}, "input[0].content"},
      {{{"input", {{{"role", "user"}, {"content", {{{"type", "input_file"}}}}}}}},
       "input[0].content[0].type"},
      {{{"input", {{{"type", "function_call"}, {"name", "f"}}}}}, "input[0].call_id"},
      {{{"input", {{{"type", "function_call"}, {"call_id", "c"}}}}}, "input[0].name"},
      {{{"input", {{{"type", "function_call_output"}, {"call_id", "c"}}}}}, "input[0].output"},
      {{{"input",
         {{{"role", "user"}, {"content", "q"}},
          {{"type", "function_call_output"}, {"call_id", "c"}, {"output", "o"}}}}},
       "input[1].call_id"},
      {{{"input", {{{"type", "computer_call"}}}}}, "input[0].type"},
      {{{"input", "x"}, {"tools", {{{"type", "file_search"}}}}}, "tools[0].type"},
      {{{"input", "x"}, {"tools", {tool, tool}}}, "name"},
      {{{"input", "x"}, {"tool_choice", "required"}}, "tool_choice"},
      {{{"input", "x"}, {"tools", {tool}}, {"tool_choice", {{"type", "mcp"}}}}, "tool_choice.type"},
      {{{"input", "x"}, {"tools", {tool}}, {"tool_choice", "sometimes"}}, "tool_choice"},
      {{{"input", "x"}, {"text", {{"format", {{"type", "yaml"}}}}}}, "text.format.type"},
      {{{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}}}}}}, "text.format.schema"},
      {{{"input", "x"}, {"text", {{"verbosity", "low"}}}}, "text.verbosity"},
      {{{"input", "x"}, {"reasoning", {{"effort", "max"}}}}, "reasoning.effort"},
      {{{"input", "x"}, {"max_output_tokens", 0}}, "max_output_tokens"},
      {{{"input", "x"}, {"previous_response_id", 5}}, "previous_response_id"},
      {{{"input", {{{"role", "user"}, {"content", "x"}, {"id", 5}}}}}, "input[0].id"},
      {{{"input", "x"}, {"conversation", 3}}, "conversation"},
      {{{"input", "x"}, {"conversation", {{"id", 3}}}}, "conversation.id"},
      {{{"input", "x"}, {"conversation", "c"}, {"previous_response_id", "r"}}, "conversation"},
      {{{"input", "x"}, {"background", true}, {"store", false}}, "background"},
      {{{"input", "x"}, {"background", "yes"}}, "background"},
      {{{"input", "x"}, {"prompt", {{"id", "p"}}}}, "prompt"},
      {{{"input", "x"}, {"truncation", "auto"}}, "truncation"},
      {{{"input", "x"}, {"include", {"reasoning.encrypted_content", "file_search_call.results"}}},
       "include[1]"},
      {{{"input", "x"}, {"n", 2}}, "n"},
      {{{"input", "x"}, {"top_logprobs", 2}}, "top_logprobs"},
      {{{"input", "x"}, {"include", {"message.output_text.logprobs"}}, {"top_logprobs", 21}},
       "top_logprobs"},
      {{{"input", "x"}, {"store", "yes"}}, "store"},
      {{{"input", "x"}, {"temperature", 3}}, "temperature"},
      {{{"input", "x"}, {"guided_json", {{"type", "object"}}}}, "guided_json"},
  };
  for (const auto& [body, param] : cases) {
    ApiError error = ExpectApiError([&] { ParseResponsesRequest(body); });
    if (param == "name") {
      EXPECT_EQ(error.param(), "tools[1].name") << body.dump();
    } else {
      EXPECT_EQ(error.param(), param) << body.dump();
    }
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidRequest);
  }
  // What nothing depends on is accepted: store either way, the one include that asks nothing.
  EXPECT_NO_THROW(ParseResponsesRequest({{"input", "x"},
                                         {"store", true},
                                         {"truncation", "disabled"},
                                         {"include", {"reasoning.encrypted_content"}},
                                         {"metadata", {{"k", "v"}}},
                                         {"n", 1}}));
}

// Items added to a conversation are checked as input: a tool result must answer a call made
// before it, in the conversation or among the items added with it.
TEST(ResponsesRequestTest, AddedConversationItemsAnswerOnlyCallsMadeBefore) {
  const Json call = {{"type", "function_call"}, {"call_id", "c1"}, {"name", "f"}};
  const Json result = {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "x"}};
  EXPECT_EQ(ExpectApiError([&] { CheckInputItems(Json::array({result}), "items"); }).param(),
            "items[0].call_id");
  CheckInputItems(Json::array({call, result}), "items");
  CheckInputItems(Json::array({result}), "items", Json::array({call}));
  EXPECT_EQ(ExpectApiError([&] {
              CheckInputItems(Json::array({result, call}), "items");
            }).param(),
            "items[0].call_id");
}

}  // namespace
}  // namespace mkserve::server
