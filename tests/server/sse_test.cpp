#include "server/sse.h"

#include <gtest/gtest.h>

namespace mkserve::server {
namespace {

TEST(SseTest, EventIsOneDataLineAndABlankLine) {
  std::string event = SseEvent({{"a", "line1\nline2"}});
  EXPECT_EQ(event.rfind("data: ", 0), 0u);
  ASSERT_GE(event.size(), 2u);
  EXPECT_EQ(event.substr(event.size() - 2), "\n\n");
  // A newline inside a value must stay escaped, or the client would see two events.
  EXPECT_EQ(event.find('\n'), event.size() - 2);
  nlohmann::json payload = nlohmann::json::parse(event.substr(6));
  EXPECT_EQ(payload["a"], "line1\nline2");
}

TEST(SseTest, DoneSentinel) { EXPECT_EQ(kSseDone, "data: [DONE]\n\n"); }

TEST(SseTest, DumpJsonReplacesInvalidUtf8) {
  std::string text = DumpJson({{"t", std::string("ok\xe2\x82")}});
  nlohmann::json parsed = nlohmann::json::parse(text);
  EXPECT_EQ(parsed["t"], "ok\xef\xbf\xbd");
}

}  // namespace
}  // namespace mkserve::server
