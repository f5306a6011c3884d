#include "common/input_json.h"

#include <gtest/gtest.h>

#include <string>

#include "common/error.h"

namespace mkserve {
namespace {

std::string ErrorOf(const std::string& text) {
  try {
    ParseInputJson(text, "policy.json");
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

// Nesting is bounded while parsing (a value 100,000 deep parses, then overflows the stack when an
// error message prints it); the error names the input.
TEST(InputJsonTest, BoundsNestingAndNamesTheInput) {
  const std::string at_limit =
      std::string(kMaxInputJsonDepth, '[') + std::string(kMaxInputJsonDepth, ']');
  EXPECT_TRUE(ParseInputJson(at_limit, "x").is_array());
  EXPECT_EQ(ErrorOf("[" + at_limit + "]"),
            "policy.json: nests JSON objects and arrays more than 64 levels deep");
  EXPECT_EQ(ErrorOf(std::string(100000, '[')),
            "policy.json: nests JSON objects and arrays more "
            "than 64 levels deep");
  EXPECT_EQ(ErrorOf("{\"a\": "), "policy.json: not valid JSON");
  EXPECT_EQ(ParseInputJson("{\"a\": [1, 2]}", "x")["a"][1], 2);
}

}  // namespace
}  // namespace mkserve
