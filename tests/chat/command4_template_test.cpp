// Expected strings are written from the rendered form in north-mini-code-facts.md §4.2 (the
// ground truth of Ollama's renderer tests for North's own template).
#include "chat/command4_template.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace mkserve::chat {
namespace {

using Json = nlohmann::ordered_json;

const char kSystemNoTools[] =
    "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TEXT|># Available "
    "Tools\n```json\n[\n\n\n\n]\n```"
    "<|END_TEXT|><|END_OF_TURN_TOKEN|>";

std::string Render(Json context) {
  if (!context.contains("add_generation_prompt")) context["add_generation_prompt"] = true;
  return Command4Template().Render(context);
}

Json WeatherTool() {
  return Json::parse(
      R"({"type": "function", "function": {"name": "get_weather", "description": "Get weather",
    "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}}})");
}

TEST(Command4TemplateTest, UserOnly) {
  Json context = {{"messages", Json::parse(R"([{"role": "user", "content": "USERMSG"}])")}};
  EXPECT_EQ(Render(context), std::string(kSystemNoTools) +
                                 "<|START_OF_TURN_TOKEN|><|USER_TOKEN|><|START_TEXT|>USERMSG<|END_"
                                 "TEXT|><|END_OF_TURN_TOKEN|>"
                                 "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>");
}

TEST(Command4TemplateTest, BosTokenComesFirst) {
  Json context = {{"messages", Json::parse(R"([{"role": "user", "content": "Q"}])")},
                  {"bos_token", "<BOS_TOKEN>"}};
  EXPECT_EQ(Render(context).rfind("<BOS_TOKEN><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>", 0), 0u);
}

TEST(Command4TemplateTest, SystemHistoryAndThinking) {
  Json context = {{"messages", Json::parse(R"([
    {"role": "system", "content": "DEVPREAMBLE"}, {"role": "user", "content": "Q1"},
    {"role": "assistant", "content": "A1", "reasoning_content": "THINK1"}, {"role": "user", "content": "Q2"}])")}};
  EXPECT_EQ(Render(context),
            "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TEXT|>DEVPREAMBLE\n\n\n\n# Available "
            "Tools\n```json\n[\n\n\n\n]\n```"
            "<|END_TEXT|><|END_OF_TURN_TOKEN|>"
            "<|START_OF_TURN_TOKEN|><|USER_TOKEN|><|START_TEXT|>Q1<|END_TEXT|><|END_OF_TURN_TOKEN|>"
            "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>THINK1<|END_THINKING|><|"
            "START_TEXT|>A1<|END_TEXT|><|END_OF_TURN_TOKEN|>"
            "<|START_OF_TURN_TOKEN|><|USER_TOKEN|><|START_TEXT|>Q2<|END_TEXT|><|END_OF_TURN_TOKEN|>"
            "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>");
}

TEST(Command4TemplateTest, ReasoningOffByEveryKwarg) {
  const std::string off_prompt =
      "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|><|END_THINKING|>";
  Json messages = Json::parse(R"([{"role": "user", "content": "Q"}])");
  for (Json kwargs : {Json{{"reasoning", false}}, Json{{"enable_thinking", false}},
                      Json{{"reasoning_effort", "none"}}}) {
    Json context = kwargs;
    context["messages"] = messages;
    std::string rendered = Render(context);
    ASSERT_GE(rendered.size(), off_prompt.size());
    EXPECT_EQ(rendered.substr(rendered.size() - off_prompt.size()), off_prompt) << kwargs.dump();
  }
  Json on = {{"messages", messages}, {"reasoning", true}};
  EXPECT_EQ(
      Render(on),
      std::string(kSystemNoTools) +
          "<|START_OF_TURN_TOKEN|><|USER_TOKEN|><|START_TEXT|>Q<|END_TEXT|><|END_OF_TURN_TOKEN|>"
          "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>");
}

TEST(Command4TemplateTest, ToolFlow) {
  Json context = {{"tools", Json::array({WeatherTool()})}, {"messages", Json::parse(R"([
    {"role": "user", "content": "weather in Paris?"},
    {"role": "assistant", "content": null, "reasoning_content": "I should call the tool",
     "tool_calls": [{"id": "call_x", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "call_x", "content": "15C sunny"},
    {"role": "user", "content": "thanks"}])")}};
  EXPECT_EQ(
      Render(context),
      "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TEXT|># Available Tools\n```json\n[\n\n"
      "    {\"name\": \"get_weather\", \"description\": \"Get weather\", \"parameters\": "
      "{\"type\": \"object\", "
      "\"required\": [\"city\"], \"properties\": {\"city\": {\"type\": \"string\"}}}, "
      "\"responses\": null}\n\n\n]\n```"
      "<|END_TEXT|><|END_OF_TURN_TOKEN|>"
      "<|START_OF_TURN_TOKEN|><|USER_TOKEN|><|START_TEXT|>weather in "
      "Paris?<|END_TEXT|><|END_OF_TURN_TOKEN|>"
      "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>\n            \n                <|START_THINKING|>I "
      "should call the tool"
      "<|END_THINKING|><|START_ACTION|>[\n\n    {\"tool_call_id\": \"0\", \"tool_name\": "
      "\"get_weather\", "
      "\"parameters\": {\"city\": \"Paris\"}}\n\n]<|END_ACTION|><|END_OF_TURN_TOKEN|>"
      "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TOOL_RESULT|>[\n    {\n        "
      "\"tool_call_id\": \"0\",\n"
      "        \"results\": {\n\n            \n            \"0\": {\"content\": \"15C sunny\"}\n\n "
      "       },\n"
      "        \"is_error\": null\n    }\n\n]<|END_TOOL_RESULT|><|END_OF_TURN_TOKEN|>"
      "<|START_OF_TURN_TOKEN|><|USER_TOKEN|><|START_TEXT|>thanks<|END_TEXT|><|END_OF_TURN_TOKEN|>"
      "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>");
}

TEST(Command4TemplateTest, ParallelCallsAndMergedResults) {
  Json context = {{"messages", Json::parse(R"([
    {"role": "user", "content": "go"},
    {"role": "assistant", "tool_calls": [
      {"id": "a", "type": "function", "function": {"name": "t1", "arguments": {}}},
      {"id": "b", "type": "function", "function": {"name": "t2", "arguments": "{\"x\": 1}"}}]},
    {"role": "tool", "tool_call_id": "a", "content": "r1"},
    {"role": "tool", "tool_call_id": "b", "content": "r2"}])")}};
  std::string rendered = Render(context);
  EXPECT_NE(
      rendered.find("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>\n            \n                "
                    "<|START_ACTION|>[\n\n"
                    "    {\"tool_call_id\": \"0\", \"tool_name\": \"t1\", \"parameters\": {}},\n\n"
                    "    {\"tool_call_id\": \"1\", \"tool_name\": \"t2\", \"parameters\": {\"x\": "
                    "1}}\n\n]<|END_ACTION|>"),
      std::string::npos)
      << rendered;
  EXPECT_NE(rendered.find("<|START_TOOL_RESULT|>[\n    {\n        \"tool_call_id\": \"0\",\n       "
                          " \"results\": {\n\n"
                          "            \n            \"0\": {\"content\": \"r1\"}\n\n        },\n  "
                          "      \"is_error\": null\n"
                          "    },\n    {\n        \"tool_call_id\": \"1\",\n        \"results\": "
                          "{\n\n            \n"
                          "            \"0\": {\"content\": \"r2\"}\n\n        },\n        "
                          "\"is_error\": null\n    }\n\n"
                          "]<|END_TOOL_RESULT|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|"
                          "CHATBOT_TOKEN|><|START_THINKING|>"),
            std::string::npos)
      << rendered;
}

TEST(Command4TemplateTest, CallIdsContinueAcrossTurnsAndResultsFollowTheirCall) {
  Json context = {{"messages", Json::parse(R"([
    {"role": "user", "content": "go"},
    {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": {}}}]},
    {"role": "tool", "tool_call_id": "a", "content": "r1"},
    {"role": "assistant", "tool_calls": [{"id": "b", "function": {"name": "g", "arguments": {}}},
                                         {"id": "c", "function": {"name": "h", "arguments": {}}}]},
    {"role": "tool", "tool_call_id": "c", "content": "rc"},
    {"role": "tool", "tool_call_id": "b", "content": "rb"}])")}};
  std::string rendered = Render(context);
  EXPECT_NE(rendered.find("{\"tool_call_id\": \"1\", \"tool_name\": \"g\""), std::string::npos);
  EXPECT_NE(rendered.find("{\"tool_call_id\": \"2\", \"tool_name\": \"h\""), std::string::npos);
  size_t rc = rendered.find(
      "\"tool_call_id\": \"2\",\n        \"results\": {\n\n            \n            \"0\": "
      "{\"content\": \"rc\"}");
  size_t rb = rendered.find(
      "\"tool_call_id\": \"1\",\n        \"results\": {\n\n            \n            \"0\": "
      "{\"content\": \"rb\"}");
  EXPECT_NE(rc, std::string::npos);
  EXPECT_NE(rb, std::string::npos);
  EXPECT_LT(rc, rb);
}

TEST(Command4TemplateTest, AssistantPrefillLeavesTextOpen) {
  Json context = {
      {"messages",
       Json::parse(
           R"([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "partial"}])")}};
  std::string rendered = Render(context);
  const std::string suffix = "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_TEXT|>partial";
  ASSERT_GE(rendered.size(), suffix.size());
  EXPECT_EQ(rendered.substr(rendered.size() - suffix.size()), suffix);
}

TEST(Command4TemplateTest, ContentPartsAreJoined) {
  Json context = {
      {"messages",
       Json::parse(
           R"([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])")}};
  EXPECT_NE(Render(context).find("<|USER_TOKEN|><|START_TEXT|>ab<|END_TEXT|>"), std::string::npos);
}

TEST(Command4TemplateTest, NoGenerationPromptWhenNotAsked) {
  Json context = {{"messages", Json::parse(R"([{"role": "user", "content": "Q"}])")},
                  {"add_generation_prompt", false}};
  std::string rendered = Render(context);
  const std::string suffix = "<|USER_TOKEN|><|START_TEXT|>Q<|END_TEXT|><|END_OF_TURN_TOKEN|>";
  ASSERT_GE(rendered.size(), suffix.size());
  EXPECT_EQ(rendered.substr(rendered.size() - suffix.size()), suffix);
}

TEST(Command4TemplateTest, UnknownRoleIsAnError) {
  Json context = {{"messages", Json::parse(R"([{"role": "wizard", "content": "Q"}])")}};
  try {
    Render(context);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("unknown message role 'wizard'"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace mkserve::chat
