#include "chat/chat_template.h"

#include <gtest/gtest.h>

namespace mkserve::chat {
namespace {

TEST(ChatTemplateTest, RendersMessages) {
  auto t = ChatTemplate::Parse("{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}");
  nlohmann::ordered_json context = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  EXPECT_EQ(t.Render(context), "[user]hi");
}

}  // namespace
}  // namespace mkserve::chat
