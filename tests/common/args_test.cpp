#include "common/args.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace mkserve {
namespace {

Args Parse(std::vector<std::string> words) { return Args(words); }

TEST(ArgsTest, ReadsValuesSwitchesAndLists) {
  Args args = Parse({"--model", "dir", "--batch", "1,2,64", "--random-weights", "--port=9000"});
  EXPECT_EQ(args.RequiredString("model"), "dir");
  EXPECT_EQ(args.IntList("batch", {}), (std::vector<int64_t>{1, 2, 64}));
  EXPECT_TRUE(args.Switch("random-weights"));
  EXPECT_EQ(args.Int("port", 8000), 9000);
  EXPECT_EQ(args.Int("absent", 7), 7);
  EXPECT_NO_THROW(args.Finish());
}

// A bounded count is checked as an int64, before a caller narrows it: 4294967297 is not 1.
TEST(ArgsTest, BoundedIntsAreCheckedBeforeNarrowing) {
  Args args = Parse({"--a", "4294967297", "--b", "0", "--c", "65535"});
  try {
    args.Int("a", 1, 1, 4096);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "--a must be 1..4096, got 4294967297");
  }
  EXPECT_THROW(args.Int("b", 1, 1, 4096), Error);
  EXPECT_EQ(args.Int("c", 8000, 0, 65535), 65535);
  EXPECT_EQ(args.Int("absent", 7, 0, 10), 7);
}

TEST(ArgsTest, ReadsStringLists) {
  Args args = Parse({"--decode", "layered,megakernel", "--empty", ""});
  EXPECT_EQ(args.StringList("decode", {}), (std::vector<std::string>{"layered", "megakernel"}));
  EXPECT_EQ(args.StringList("empty", {"x"}), (std::vector<std::string>{""}));
  EXPECT_EQ(args.StringList("absent", {"layered"}), (std::vector<std::string>{"layered"}));
  EXPECT_NO_THROW(args.Finish());
}

TEST(ArgsTest, RejectsUnknownDuplicateAndMalformedFlags) {
  Args unknown = Parse({"--modle", "dir"});
  EXPECT_THROW(unknown.Finish(), Error);
  Args twice = Parse({"--port", "1", "--port", "2"});
  EXPECT_THROW(twice.Int("port", 0), Error);
  Args bad_int = Parse({"--port", "80x"});
  EXPECT_THROW(bad_int.Int("port", 0), Error);
  Args missing_value = Parse({"--model"});
  EXPECT_THROW(missing_value.RequiredString("model"), Error);
  EXPECT_THROW(Parse({"positional"}), Error);
}

}  // namespace
}  // namespace mkserve
