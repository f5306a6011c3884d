// The built-in Command-4 template against North's real template rendered by @huggingface/jinja
// with transformers' settings:
// tests/chat/fixtures/command4_renders.json holds the contexts and the expected prompts, written
// by tools/chat_fixtures/render_command4_fixtures.mjs from the real template file.
#include "chat/command4_template.h"

#include <gtest/gtest.h>

#include <fstream>

#include "chat/continue_final_message.h"
#include "common/error.h"

namespace mkserve::chat {
namespace {

using Json = nlohmann::ordered_json;

Json LoadFixtures() {
  std::ifstream file(std::string(MKSERVE_SOURCE_DIR) +
                     "/tests/chat/fixtures/command4_renders.json");
  EXPECT_TRUE(file) << "missing tests/chat/fixtures/command4_renders.json";
  return Json::parse(file);
}

TEST(Command4TemplateTest, MatchesTransformersRenderOfTheRealTemplate) {
  Json fixtures = LoadFixtures();
  ASSERT_GE(fixtures["cases"].size(), 12u);
  for (const Json& fixture : fixtures["cases"]) {
    const Json& context = fixture["context"];
    std::string rendered = Command4Template().Render(context);
    if (fixture["continue_final_message"].get<bool>()) {
      rendered =
          ContinueFinalMessage(rendered, context["messages"].back()["content"].get<std::string>());
    }
    EXPECT_EQ(rendered, fixture["prompt"].get<std::string>()) << fixture["name"];
  }
}

// The template scans every earlier call id for each tool result (rounds^2 loop iterations): a long
// agent session that fits a 128K context must still render (1,450 rounds used to be refused), and
// each result keeps the number of its own call.
TEST(Command4TemplateTest, LongAgentSessionsRender) {
  const int rounds = 2500;
  Json messages = Json::array({{{"role", "user"}, {"content", "U"}}});
  for (int i = 0; i < rounds; ++i) {
    const std::string id = "call_" + std::to_string(i);
    messages.push_back(
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls", Json::array({{{"id", id},
                                      {"type", "function"},
                                      {"function", {{"name", "f"}, {"arguments", "{}"}}}}})}});
    messages.push_back(
        {{"role", "tool"}, {"tool_call_id", id}, {"content", "r" + std::to_string(i)}});
  }
  const std::string rendered = Command4Template().Render({{"messages", messages}});
  EXPECT_NE(rendered.find("\"tool_call_id\": \"2499\""), std::string::npos);
}

TEST(Command4TemplateTest, UnknownRoleIsAnError) {
  Json context = {{"messages", Json::parse(R"([{"role": "wizard", "content": "Q"}])")}};
  try {
    Command4Template().Render(context);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("unknown message role 'wizard'"), std::string::npos)
        << error.what();
  }
}

TEST(ContinueFinalMessageTest, CutsAfterTheLastOccurrence) {
  EXPECT_EQ(ContinueFinalMessage("<T>hi<E><T>hi<E>", "hi"), "<T>hi<E><T>hi");
}

TEST(ContinueFinalMessageTest, KeepsTrailingWhitespaceOnlyWhenRendered) {
  EXPECT_EQ(ContinueFinalMessage("<T>Dear Sir, <E>", "Dear Sir, "), "<T>Dear Sir, ");
  EXPECT_EQ(ContinueFinalMessage("<T>Dear Sir,<E>", "  Dear Sir, "), "<T>Dear Sir,");
}

TEST(ContinueFinalMessageTest, TextNotInTheRenderIsAnError) {
  EXPECT_THROW(ContinueFinalMessage("<T>hello<E>", "bye"), Error);
  EXPECT_THROW(ContinueFinalMessage("<T><E>", "  "), Error);
}

}  // namespace
}  // namespace mkserve::chat
