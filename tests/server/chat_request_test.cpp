#include "server/chat_request.h"

#include <gtest/gtest.h>

#include "server/api_error_matcher.h"

namespace mkserve::server {
namespace {

Json MinimalChat() {
  return {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
}

TEST(ChatRequestTest, ReadsEverySamplingField) {
  Json body = MinimalChat();
  body.update({{"temperature", 0.5},
               {"top_p", 0.9},
               {"top_k", 40},
               {"min_p", 0.05},
               {"max_completion_tokens", 32},
               {"stop", "END"},
               {"include_stop_str_in_output", true},
               {"stop_token_ids", {7, 9}},
               {"seed", 1234},
               {"n", 2},
               {"presence_penalty", 0.5},
               {"frequency_penalty", -0.5},
               {"repetition_penalty", 1.1},
               {"logit_bias", {{"42", -100}}},
               {"min_tokens", 3},
               {"ignore_eos", true},
               {"logprobs", true},
               {"top_logprobs", 5},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}},
               {"user", "u1"}});
  ChatRequest request = ParseChatRequest(body);
  const SamplingParams& sampling = request.generation.sampling;
  EXPECT_FLOAT_EQ(sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(sampling.top_p, 0.9f);
  EXPECT_EQ(sampling.top_k, 40);
  EXPECT_FLOAT_EQ(sampling.min_p, 0.05f);
  EXPECT_EQ(sampling.max_tokens, 32);
  EXPECT_TRUE(request.generation.has_max_tokens);
  EXPECT_EQ(sampling.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(sampling.include_stop_str_in_output);
  EXPECT_EQ(sampling.stop_token_ids, (std::vector<int32_t>{7, 9}));
  EXPECT_EQ(sampling.seed, 1234u);
  EXPECT_EQ(request.generation.n, 2);
  EXPECT_FLOAT_EQ(sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(sampling.repetition_penalty, 1.1f);
  ASSERT_EQ(sampling.logit_bias.size(), 1u);
  EXPECT_EQ(sampling.logit_bias[0].first, 42);
  EXPECT_FLOAT_EQ(sampling.logit_bias[0].second, -100.0f);
  EXPECT_EQ(sampling.min_tokens, 3);
  EXPECT_TRUE(sampling.ignore_eos);
  EXPECT_EQ(sampling.num_logprobs, 5);
  EXPECT_TRUE(request.generation.stream);
  EXPECT_TRUE(request.generation.include_usage);
  EXPECT_EQ(request.generation.user, "u1");
}

TEST(ChatRequestTest, ContentPartsAreJoinedAndNonTextPartsRefused) {
  Json body = MinimalChat();
  body["messages"][0]["content"] = {{{"type", "text"}, {"text", "a"}},
                                    {{"type", "text"}, {"text", "b"}}};
  EXPECT_EQ(ParseChatRequest(body).messages[0].content, "ab");
  body["messages"][0]["content"][1] = {{"type", "image_url"}, {"image_url", {{"url", "x"}}}};
  ApiError error = ExpectApiError([&] { ParseChatRequest(body); });
  EXPECT_EQ(error.param(), "messages[0].content[1].type");
}

TEST(ChatRequestTest, OutOfRangeNamesTheParam) {
  for (auto [name, value] : std::vector<std::pair<std::string, Json>>{{"temperature", 2.5},
                                                                      {"top_p", 0.0},
                                                                      {"n", 0},
                                                                      {"presence_penalty", 3},
                                                                      {"top_k", -2},
                                                                      {"max_tokens", -1},
                                                                      {"min_p", 1.5},
                                                                      {"max_tokens", 0}}) {
    Json body = MinimalChat();
    body[name] = value;
    ApiError error = ExpectApiError([&] { ParseChatRequest(body); });
    EXPECT_EQ(error.param(), name) << name << "=" << value;
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidRequest);
  }
}

// Chat takes max_tokens from 1 (completions from 0): the message states the range chat takes,
// under whichever of the two names was sent.
TEST(ChatRequestTest, MaxTokensRangeStartsAtOne) {
  for (const std::string name : {"max_tokens", "max_completion_tokens"}) {
    for (int value : {0, -1}) {
      Json body = MinimalChat();
      body[name] = value;
      ApiError error = ExpectApiError([&] { ParseChatRequest(body); });
      EXPECT_EQ(error.param(), name);
      EXPECT_NE(std::string(error.what()).find("between 1 and"), std::string::npos)
          << name << "=" << value << ": " << error.what();
    }
  }
}

// vLLM's add_special_tokens: off for chat (the template writes BOS), a boolean or a 400.
TEST(ChatRequestTest, AddSpecialTokensIsABooleanOffByDefault) {
  EXPECT_FALSE(ParseChatRequest(MinimalChat()).add_special_tokens);
  Json body = MinimalChat();
  body["add_special_tokens"] = true;
  EXPECT_TRUE(ParseChatRequest(body).add_special_tokens);
  body["add_special_tokens"] = "yes";
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(), "add_special_tokens");
}

// vLLM's extensions that would change the output, which mkserve does not implement, are refused
// by name; the values that ask for what mkserve does anyway are accepted.
TEST(ChatRequestTest, UnhonouredVllmFieldsAreRefusedByName) {
  for (auto [name, value] :
       std::vector<std::pair<std::string, Json>>{{"guided_json", {{"type", "object"}}},
                                                 {"guided_regex", "[a-z]+"},
                                                 {"guided_choice", {"yes", "no"}},
                                                 {"guided_grammar", "root ::= \"a\""},
                                                 {"structural_tag", "{}"},
                                                 {"use_beam_search", true},
                                                 {"allowed_token_ids", {1, 2}},
                                                 {"bad_words", {"x"}},
                                                 {"truncate_prompt_tokens", 10},
                                                 {"prompt_logprobs", 1},
                                                 {"logits_processors", Json::array()},
                                                 {"chat_template", "{{ messages }}"},
                                                 {"echo", true}}) {
    Json body = MinimalChat();
    body[name] = value;
    ApiError error = ExpectApiError([&] { ParseChatRequest(body); });
    EXPECT_EQ(error.param(), name) << name << "=" << value;
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidRequest);
  }
  Json body = MinimalChat();
  for (const char* name : {"use_beam_search", "echo"}) body[name] = false;
  body["guided_json"] = nullptr;  // null is absent
  EXPECT_NO_THROW(ParseChatRequest(body));
}

// vLLM's documents: objects or strings, kept for the template; anything else names its index.
TEST(ChatRequestTest, DocumentsAreObjectsOrStrings) {
  Json body = MinimalChat();
  body["documents"] = {{{"title", "a"}, {"text", "b"}}, "plain"};
  EXPECT_EQ(ParseChatRequest(body).documents, body["documents"]);
  EXPECT_TRUE(ParseChatRequest(MinimalChat()).documents.empty());
  body["documents"] = {{{"text", "b"}}, 3};
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(), "documents[1]");
  body["documents"] = {{{"title", "a"}, {"year", 2024}}};
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(), "documents[0].year");
  body["documents"] = "not a list";
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(), "documents");
}

TEST(ChatRequestTest, WrongTypesNameTheParam) {
  for (auto [name, value] : std::vector<std::pair<std::string, Json>>{{"temperature", "hot"},
                                                                      {"stream", 1},
                                                                      {"stop", 5},
                                                                      {"messages", "hi"},
                                                                      {"logit_bias", {{"abc", 1}}},
                                                                      {"logit_bias", {{" 5", 1}}},
                                                                      {"logit_bias", {{"+5", 1}}},
                                                                      {"logit_bias", {{"05", 1}}},
                                                                      {"logit_bias", {{"", 1}}},
                                                                      {"tool_choice", "sometimes"},
                                                                      {"seed", 1.5}}) {
    Json body = MinimalChat();
    body[name] = value;
    ApiError error = ExpectApiError([&] { ParseChatRequest(body); });
    EXPECT_EQ(error.param().substr(0, name.size()), name) << name << "=" << value;
  }
}

TEST(ChatRequestTest, RoleAndMessageShapeAreChecked) {
  Json body = MinimalChat();
  body["messages"][0]["role"] = "wizard";
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(), "messages[0].role");
  body["messages"] = Json::array();
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(), "messages");
  body.erase("messages");
  EXPECT_TRUE(Mentions(ExpectApiError([&] { ParseChatRequest(body); }), "required"));
}

Json WeatherTool() {
  Json parameters = {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}};
  return {{"type", "function"},
          {"function", {{"name", "get_weather"}, {"parameters", parameters}}}};
}

TEST(ChatRequestTest, ToolsAndToolChoiceModes) {
  Json body = MinimalChat();
  body["tools"] = {WeatherTool()};
  EXPECT_EQ(ParseChatRequest(body).tool_choice.mode, ToolChoice::Mode::kAuto);
  body["tool_choice"] = "required";
  EXPECT_EQ(ParseChatRequest(body).tool_choice.mode, ToolChoice::Mode::kRequired);
  body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  ChatRequest named = ParseChatRequest(body);
  EXPECT_EQ(named.tool_choice.mode, ToolChoice::Mode::kNamed);
  EXPECT_EQ(named.tool_choice.name, "get_weather");
  EXPECT_EQ(named.tools[0].parameters["properties"]["city"]["type"], "string");
  body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "nope"}}}};
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(), "tool_choice.function.name");
  body.erase("tools");
  body["tool_choice"] = "required";
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(), "tool_choice");
}

// Two tools of one name would make a call's schema ambiguous: a 400 naming the second.
TEST(ChatRequestTest, ToolNamesAreUnique) {
  Json body = MinimalChat();
  body["tools"] = {WeatherTool(), WeatherTool()};
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(), "tools[1].function.name");
}

// A call's parameters are an object, so a tool's schema must describe one (a schema of another
// type could only be generated as a call the parser refuses); one without a type is taken as an
// object. Names follow OpenAI's rule.
TEST(ChatRequestTest, ToolParametersAreAnObjectAndNamesArePlain) {
  Json body = MinimalChat();
  for (const char* type : {"integer", "string", "array", "null"}) {
    body["tools"] = {WeatherTool()};
    body["tools"][0]["function"]["parameters"]["type"] = type;
    EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(),
              "tools[0].function.parameters.type")
        << type;
  }
  body["tools"] = {WeatherTool()};
  body["tools"][0]["function"]["parameters"].erase("type");
  EXPECT_EQ(ParseChatRequest(body).tools[0].parameters["type"], "object");
  body["tools"][0]["function"]["parameters"] = {{"$ref", "#/$defs/a"}};
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(),
            "tools[0].function.parameters");
  for (const char* name : {"get weather", "f.g", "", "\xc3\xa9t\xc3\xa9"}) {
    body["tools"] = {WeatherTool()};
    body["tools"][0]["function"]["name"] = name;
    EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(), "tools[0].function.name")
        << name;
  }
  body["tools"][0]["function"]["name"] = std::string(65, 'a');
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(), "tools[0].function.name");
  body["tools"][0]["function"]["name"] = std::string(64, 'a');
  EXPECT_EQ(ParseChatRequest(body).tools[0].name, std::string(64, 'a'));
}

// A schema that is no JSON Schema is refused even when no call is forced (the template would
// show it to the model as it is), naming the culprit inside it.
TEST(ChatRequestTest, ToolParametersMustBeJsonSchema) {
  Json body = MinimalChat();
  body["tools"] = {WeatherTool()};
  body["tools"][0]["function"]["parameters"]["properties"]["city"]["type"] = "strnig";
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(),
            "tools[0].function.parameters.properties.city.type");
  body["tools"] = {WeatherTool()};
  body["tools"][0]["function"]["parameters"]["required"] = "city";
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(),
            "tools[0].function.parameters.required");
  // Valid JSON Schema the grammar compiler would refuse passes while nothing is constrained.
  body["tools"] = {WeatherTool()};
  body["tools"][0]["function"]["parameters"]["properties"]["city"]["oneOf"] = {{{"minLength", 1}}};
  EXPECT_EQ(ParseChatRequest(body).tools.size(), 1u);
}

TEST(ChatRequestTest, AssistantToolCallsAndToolResults) {
  Json body = MinimalChat();
  body["messages"].push_back(
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        {{{"id", "call_1"},
          {"type", "function"},
          {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}}}});
  body["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}});
  ChatRequest request = ParseChatRequest(body);
  ASSERT_EQ(request.messages.size(), 3u);
  EXPECT_FALSE(request.messages[1].content.has_value());
  EXPECT_EQ(request.messages[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(request.messages[1].tool_calls[0].arguments, "{\"city\":\"Paris\"}");
  EXPECT_EQ(request.messages[2].tool_call_id, "call_1");
}

// A tool result must name a call an earlier assistant turn made (as at OpenAI): otherwise the
// prompt would carry a result of no call.
TEST(ChatRequestTest, AToolResultAnswersAnEarlierCall) {
  Json body = MinimalChat();
  body["messages"].push_back({{"role", "tool"}, {"content", "sunny"}});
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(), "messages[1].tool_call_id");
  body["messages"][1]["tool_call_id"] = "call_1";
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(), "messages[1].tool_call_id");
  // The call comes after its result: still refused.
  body["messages"].push_back({{"role", "assistant"},
                              {"tool_calls",
                               {{{"id", "call_1"},
                                 {"type", "function"},
                                 {"function", {{"name", "get_weather"}, {"arguments", "{}"}}}}}}});
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(), "messages[1].tool_call_id");
}

TEST(ChatRequestTest, ReasoningSwitches) {
  Json body = MinimalChat();
  EXPECT_FALSE(ParseChatRequest(body).enable_thinking.has_value());
  body["chat_template_kwargs"] = {{"enable_thinking", false}};
  EXPECT_EQ(ParseChatRequest(body).enable_thinking, false);
  body.erase("chat_template_kwargs");
  body["reasoning_effort"] = "high";
  EXPECT_EQ(ParseChatRequest(body).enable_thinking, true);
  body["reasoning_effort"] = "none";
  EXPECT_EQ(ParseChatRequest(body).enable_thinking, false);
  body["reasoning_effort"] = "extreme";
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(), "reasoning_effort");
}

TEST(ChatRequestTest, StreamOptionsNeedStreamAndTopLogprobsNeedsLogprobs) {
  Json body = MinimalChat();
  body["stream_options"] = {{"include_usage", true}};
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(), "stream_options");
  body.erase("stream_options");
  body["top_logprobs"] = 3;
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(), "top_logprobs");
}

TEST(ChatRequestTest, MinTokensMayNotExceedMaxTokens) {
  Json body = MinimalChat();
  body["max_tokens"] = 4;
  body["min_tokens"] = 5;
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(), "min_tokens");
}

TEST(ChatRequestTest, ResponseFormatTypes) {
  Json body = MinimalChat();
  EXPECT_EQ(ParseChatRequest(body).response_format.type, ResponseFormat::Type::kText);
  body["response_format"] = {{"type", "text"}};
  EXPECT_EQ(ParseChatRequest(body).response_format.type, ResponseFormat::Type::kText);
  body["response_format"] = {{"type", "json_object"}};
  EXPECT_EQ(ParseChatRequest(body).response_format.type, ResponseFormat::Type::kJsonObject);
  body["response_format"] = {
      {"type", "json_schema"},
      {"json_schema", {{"name", "p"}, {"strict", true}, {"schema", {{"type", "object"}}}}}};
  ResponseFormat format = ParseChatRequest(body).response_format;
  EXPECT_EQ(format.type, ResponseFormat::Type::kJsonSchema);
  EXPECT_EQ(format.schema, Json({{"type", "object"}}));
  body["response_format"]["json_schema"]["strict"] = "yes";
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(),
            "response_format.json_schema.strict");
  body["response_format"]["json_schema"]["strict"] = true;
  body["response_format"]["json_schema"]["name"] = 7;
  EXPECT_EQ(ExpectApiError([&] { ParseChatRequest(body); }).param(),
            "response_format.json_schema.name");
}

TEST(ChatRequestTest, ResponseFormatErrorsNameTheField) {
  auto error_for = [](Json format) {
    Json body = MinimalChat();
    body["response_format"] = std::move(format);
    return ExpectApiError([&] { ParseChatRequest(body); });
  };
  ApiError unknown = error_for({{"type", "xml"}});
  EXPECT_EQ(unknown.param(), "response_format.type");
  EXPECT_TRUE(Mentions(unknown, "unknown response_format type 'xml'"));
  EXPECT_EQ(error_for("json").param(), "response_format");
  EXPECT_EQ(error_for(Json::object()).param(), "response_format.type");
  EXPECT_EQ(error_for({{"type", "json_schema"}}).param(), "response_format.json_schema");
  EXPECT_EQ(error_for({{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}).param(),
            "response_format.json_schema.schema");
  EXPECT_EQ(error_for({{"type", "json_schema"}, {"json_schema", {{"schema", 3}}}}).param(),
            "response_format.json_schema.schema");
}

TEST(ChatRequestTest, UnknownFieldsAreIgnored) {
  Json body = MinimalChat();
  body.update({{"frobnicate", true},
               {"x_extension", {{"a", 1}}},
               {"metadata", {{"k", "v"}}},
               {"prediction", {{"type", "content"}, {"content", "old text"}}},
               {"prompt_cache_key", "k"},
               {"safety_identifier", "s"},
               {"store", false},
               {"service_tier", "auto"},
               {"verbosity", "medium"},
               {"modalities", {"text"}}});
  EXPECT_EQ(ParseChatRequest(body).messages.size(), 1u);
}

TEST(ChatRequestTest, ValuesThatCannotBeHonouredNameTheField) {
  const std::vector<std::pair<std::string, Json>> cases = {
      {"audio", {{"voice", "alloy"}, {"format", "wav"}}},
      {"modalities", {"text", "audio"}},
      {"functions", {{{"name", "f"}}}},
      {"function_call", "auto"},
      {"web_search_options", Json::object()},
      {"store", true},
      {"service_tier", "priority"},
      {"verbosity", "low"},
      {"prediction", "old text"},
      {"stream_options", "yes"},
      {"n", 17},
      {"logit_bias", {{"5", 101}}},
  };
  for (const auto& [name, value] : cases) {
    Json body = MinimalChat();
    body[name] = value;
    if (name == "stream_options") body["stream"] = true;
    ApiError error = ExpectApiError([&] { ParseChatRequest(body); });
    EXPECT_EQ(error.param().substr(0, name.size()), name) << name << "=" << value;
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidRequest) << name;
  }
}

}  // namespace
}  // namespace mkserve::server
