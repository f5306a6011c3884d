#include "server/url_query.h"

#include <gtest/gtest.h>

namespace mkserve::server {
namespace {

TEST(UrlQueryTest, PercentEscapesAndPairs) {
  EXPECT_EQ(PercentDecoded("org%2Fmodel"), "org/model");
  EXPECT_EQ(PercentDecoded("50%"), "50%");    // an escape cut short is kept as is
  EXPECT_EQ(PercentDecoded("%zz1"), "%zz1");  // so is one that is not hex
  using Params = std::multimap<std::string, std::string>;
  EXPECT_EQ(ParseQuery(""), Params{});
  EXPECT_EQ(ParseQuery("limit=5&order=asc"), (Params{{"limit", "5"}, {"order", "asc"}}));
  EXPECT_EQ(ParseQuery("after=msg%5F1&flag&&a=1&a=2&q=x+y"),
            (Params{{"after", "msg_1"}, {"flag", ""}, {"a", "1"}, {"a", "2"}, {"q", "x y"}}));
  EXPECT_EQ(ParseQuery("k=a%3Db"), (Params{{"k", "a=b"}}));
}

TEST(UrlQueryTest, AValueIsTheLastOneSent) {
  const std::multimap<std::string, std::string> query = ParseQuery("a=1&b=2&a=3&c");
  EXPECT_EQ(QueryValue(query, "a"), "3");
  EXPECT_EQ(QueryValue(query, "b"), "2");
  EXPECT_EQ(QueryValue(query, "c"), "");
  EXPECT_EQ(QueryValue(query, "d"), std::nullopt);
}

TEST(UrlQueryTest, IntegersAreWholeDecimalValues) {
  EXPECT_EQ(QueryInteger("20"), 20);
  EXPECT_EQ(QueryInteger("-3"), -3);
  EXPECT_EQ(QueryInteger("0"), 0);
  for (const char* bad : {"", "5x", "x5", " 5", "5 ", "1.5", "+5", "99999999999999999999"}) {
    EXPECT_EQ(QueryInteger(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace mkserve::server
