// The decimal steps multipleOf takes, as JSON writes them.
#include "grammar/multiple_of.h"

#include <gtest/gtest.h>

namespace mkserve::grammar {
namespace {

void ExpectStep(const char* text, int64_t digits, int exponent) {
  const std::optional<DecimalStep> step = ParseDecimalStep(text);
  ASSERT_TRUE(step.has_value()) << text;
  EXPECT_EQ(step->digits, digits) << text;
  EXPECT_EQ(step->exponent, exponent) << text;
}

TEST(MultipleOfTest, DecimalStepsAreDigitsAndAPowerOfTen) {
  ExpectStep("0.25", 25, -2);
  ExpectStep("60", 6, 1);
  ExpectStep("7", 7, 0);
  ExpectStep("2.50", 25, -1);
  ExpectStep("1e-3", 1, -3);
  ExpectStep("6E+2", 6, 2);
  ExpectStep("1.5e1", 15, 0);
  ExpectStep("0.000120", 12, -5);
  ExpectStep("123456789012345678", 123456789012345678, 0);
  for (const char* refused : {"0", "0.0", "-5", "1234567890123456789", "abc", "1e", "1.2.3"}) {
    EXPECT_FALSE(ParseDecimalStep(refused).has_value()) << refused;
  }
}

TEST(MultipleOfTest, RemaindersCarryAWholeStepsZeros) {
  EXPECT_EQ(MultipleOfRemainders({25, -2}), 25);
  EXPECT_EQ(MultipleOfRemainders({6, 1}), 60);
  EXPECT_EQ(MultipleOfRemainders({3, 0}), 3);
  EXPECT_GT(MultipleOfRemainders({3, 40}),
            kMaxMultipleOfRemainders);  // stops counting, no overflow
}

}  // namespace
}  // namespace mkserve::grammar
