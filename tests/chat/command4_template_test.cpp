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
