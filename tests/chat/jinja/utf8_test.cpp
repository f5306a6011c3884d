// Python str semantics of the Jinja engine: code points through common/utf8.h, str.isspace().
#include <gtest/gtest.h>

#include "chat/jinja/python_space.h"
#include "common/utf8.h"

namespace mkserve::chat::jinja {
namespace {

TEST(Utf8Test, RoundTripsAndCountsCodePoints) {
  const std::string text = "aé日🦀";
  std::u32string decoded = DecodeUtf8(text);
  EXPECT_EQ(decoded, (std::u32string{U'a', U'é', U'日', U'🦀'}));
  EXPECT_EQ(EncodeUtf8(decoded), text);
  EXPECT_EQ(CodePointCount(text), 4u);
}

TEST(Utf8Test, InvalidBytesBecomeTheirOwnCodePoints) {
  std::u32string decoded = DecodeUtf8("a\xFF\xC3");
  EXPECT_EQ(decoded, (std::u32string{U'a', 0xFF, 0xC3}));
}

TEST(Utf8Test, Whitespace) {
  EXPECT_TRUE(IsSpace(U' '));
  EXPECT_TRUE(IsSpace(U'\u3000'));
  EXPECT_TRUE(IsSpace(U'\u00A0'));
  EXPECT_FALSE(IsSpace(U'x'));
}

}  // namespace
}  // namespace mkserve::chat::jinja
