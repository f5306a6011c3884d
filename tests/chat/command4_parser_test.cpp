#include "chat/command4_parser.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

namespace mkserve::chat {
namespace {

using Kind = Command4Event::Kind;

Command4ParserOptions Options(bool starts_in_reasoning = true) {
  Command4ParserOptions options;
  options.starts_in_reasoning = starts_in_reasoning;
  options.make_tool_call_id = [](int index) { return "call_" + std::to_string(index); };
  return options;
}

// Feeds `pieces` and merges the events, so that runs of deltas compare as whole strings.
std::vector<Command4Event> FeedPieces(const std::vector<std::string>& pieces,
                                      bool starts_in_reasoning = true) {
  Command4Parser parser(Options(starts_in_reasoning));
  std::vector<Command4Event> merged;
  for (const std::string& piece : pieces) {
    for (Command4Event& event : parser.Feed(piece)) AppendEvent(merged, std::move(event));
  }
  for (Command4Event& event : parser.Finish()) AppendEvent(merged, std::move(event));
  return merged;
}

// Byte-exact and printable (a split can cut a UTF-8 sequence, so no JSON dump here).
std::string Escape(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c < 0x20 || c >= 0x7F || c == '\\') {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\x%02x", c);
      out += buffer;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string Describe(const std::vector<Command4Event>& events) {
  std::string out;
  for (const Command4Event& e : events) {
    out += "[" + std::to_string(static_cast<int>(e.kind)) + " i=" + std::to_string(e.tool_index) +
           " id=" + e.tool_call_id + " name=" + e.tool_name + " text=" + Escape(e.text) +
           " raw=" + Escape(e.raw) + "]\n";
  }
  return out;
}

struct Case {
  const char* name;
  std::string text;
  bool starts_in_reasoning;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> kCases = {
      {"reasoning_and_text",
       "Compare 2<3 and <b>tags</b> <| not a marker.<|END_THINKING|><|START_TEXT|>4 < 5, so "
       "yes.<|END_TEXT|>"
       "<|END_OF_TURN_TOKEN|>",
       true},
      {"single_action",
       "I should call it.<|END_THINKING|><|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": "
       "\"get_weather\", "
       "\"parameters\": {\"city\": \"Paris\"}}]<|END_ACTION|><|END_OF_TURN_TOKEN|>",
       true},
      {"parallel_actions",
       "Two calls.<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": "
       "\"a\", \"parameters\": {}},\n"
       "    {\"tool_call_id\": \"1\", \"tool_name\": \"b\", \"parameters\": {\"x\": [1, 2.5e3, "
       "-0.1, true, null]}}\n]"
       "<|END_ACTION|><|END_OF_TURN_TOKEN|>",
       true},
      {"nested_with_markers_in_strings",
       "<|END_THINKING|><|START_ACTION|>[{\"tool_name\": \"run\", \"parameters\": {\"code\": "
       "\"print(\\\"<|END_ACTION|>\\\")\", "
       "\"nested\": {\"list\": [{\"k\": \"}]\"}], \"path\": \"C:\\\\dir\\\\\", \"end\": "
       "\"<|END_OF_TURN_TOKEN|>\"}}}]"
       "<|END_ACTION|><|END_OF_TURN_TOKEN|>",
       true},
      {"unicode",
       "日本語で考える 🦀<|END_THINKING|><|START_ACTION|>[{\"tool_name\": \"café\", "
       "\"parameters\": {\"q\": \"☕ naïve\", "
       "\"e\": \"\\u00e9\"}}]<|END_ACTION|>",
       true},
      {"parameters_before_name",
       "<|END_THINKING|><|START_ACTION|>[{\"parameters\": {\"a\": {\"b\": 1}}, \"tool_call_id\": "
       "\"0\", \"tool_name\": \"late\"}]"
       "<|END_ACTION|>",
       true},
      {"answer_mode_legacy_response",
       "<|START_RESPONSE|>Hi <there>!<|END_RESPONSE|><|END_OF_TURN_TOKEN|>ignored", false},
      {"invalid_json",
       "<|END_THINKING|><|START_ACTION|>[{\"tool_name\": \"f\", \"parameters\": {\"a\": "
       "}}]<|END_ACTION|>",
       true},
      {"truncated_action",
       "<|END_THINKING|><|START_ACTION|>[{\"tool_name\": \"f\", \"parameters\": {\"a\": 1", true},
      {"partial_marker_at_end", "thinking then <|END_THI", true},
  };
  return kCases;
}

// The point of the streaming design: wherever the deltas split, the merged events are equal.
TEST(Command4ParserTest, EverySplitPositionGivesTheSameEvents) {
  for (const Case& c : Cases()) {
    std::vector<Command4Event> whole = FeedPieces({c.text}, c.starts_in_reasoning);
    for (size_t split = 0; split <= c.text.size(); ++split) {
      std::vector<Command4Event> parts =
          FeedPieces({c.text.substr(0, split), c.text.substr(split)}, c.starts_in_reasoning);
      ASSERT_EQ(Describe(parts), Describe(whole)) << c.name << " split at " << split;
    }
    std::vector<std::string> bytes;
    for (char ch : c.text) bytes.emplace_back(1, ch);
    EXPECT_EQ(Describe(FeedPieces(bytes, c.starts_in_reasoning)), Describe(whole))
        << c.name << " byte by byte";
  }
}

Command4Output ParseCase(const char* name) {
  for (const Case& c : Cases()) {
    if (std::string(name) == c.name)
      return Command4Parser::ParseAll(c.text, Options(c.starts_in_reasoning));
  }
  ADD_FAILURE() << "no case " << name;
  return {};
}

TEST(Command4ParserTest, ReasoningAndText) {
  Command4Output out = ParseCase("reasoning_and_text");
  EXPECT_EQ(out.reasoning, "Compare 2<3 and <b>tags</b> <| not a marker.");
  EXPECT_EQ(out.content, "4 < 5, so yes.");
  EXPECT_TRUE(out.tool_calls.empty());
  EXPECT_FALSE(out.error);
}

TEST(Command4ParserTest, SingleAction) {
  Command4Output out = ParseCase("single_action");
  EXPECT_EQ(out.reasoning, "I should call it.");
  EXPECT_EQ(out.content, "");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].id, "call_0");
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(out.tool_calls[0].arguments, "{\"city\": \"Paris\"}");
}

TEST(Command4ParserTest, ParallelActions) {
  Command4Output out = ParseCase("parallel_actions");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].name, "a");
  EXPECT_EQ(out.tool_calls[0].arguments, "{}");
  EXPECT_EQ(out.tool_calls[1].id, "call_1");
  EXPECT_EQ(out.tool_calls[1].name, "b");
  EXPECT_EQ(out.tool_calls[1].arguments, "{\"x\": [1, 2.5e3, -0.1, true, null]}");
}

TEST(Command4ParserTest, MarkersInsideJsonStringsAreText) {
  Command4Output out = ParseCase("nested_with_markers_in_strings");
  ASSERT_EQ(out.tool_calls.size(), 1u) << out.error.value_or("");
  const std::string arguments = out.tool_calls[0].arguments;
  EXPECT_EQ(
      arguments,
      "{\"code\": \"print(\\\"<|END_ACTION|>\\\")\", \"nested\": {\"list\": [{\"k\": \"}]\"}], "
      "\"path\": \"C:\\\\dir\\\\\", \"end\": \"<|END_OF_TURN_TOKEN|>\"}}");
  auto parsed = nlohmann::json::parse(arguments);
  EXPECT_EQ(parsed["code"], "print(\"<|END_ACTION|>\")");
  EXPECT_EQ(parsed["nested"]["path"], "C:\\dir\\");
}

TEST(Command4ParserTest, Unicode) {
  Command4Output out = ParseCase("unicode");
  EXPECT_EQ(out.reasoning, "日本語で考える 🦀");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].name, "café");
  EXPECT_EQ(nlohmann::json::parse(out.tool_calls[0].arguments)["e"], "é");
}

TEST(Command4ParserTest, ArgumentsBeforeNameAreHeldUntilTheName) {
  Command4Output out = ParseCase("parameters_before_name");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].name, "late");
  EXPECT_EQ(out.tool_calls[0].arguments, "{\"a\": {\"b\": 1}}");
}

TEST(Command4ParserTest, AnswerModeLegacyMarkersAndEndOfTurn) {
  Command4Output out = ParseCase("answer_mode_legacy_response");
  EXPECT_EQ(out.reasoning, "");
  EXPECT_EQ(out.content, "Hi <there>!");
}

TEST(Command4ParserTest, InvalidJsonIsAnErrorWithTheRawText) {
  Command4Output out = ParseCase("invalid_json");
  ASSERT_TRUE(out.error);
  EXPECT_NE(out.error->find("invalid tool call JSON"), std::string::npos) << *out.error;
  EXPECT_EQ(out.error_raw, "[{\"tool_name\": \"f\", \"parameters\": {\"a\": }}]");
}

TEST(Command4ParserTest, TruncatedActionIsAnError) {
  Command4Output out = ParseCase("truncated_action");
  ASSERT_TRUE(out.error);
  EXPECT_NE(out.error->find("ends before it is complete"), std::string::npos) << *out.error;
}

TEST(Command4ParserTest, UndecidedMarkerPrefixIsHeldThenFlushed) {
  Command4Parser parser(Options());
  std::vector<Command4Event> events = parser.Feed("thinking then <|END_THI");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::kReasoning);
  EXPECT_EQ(events[0].text, "thinking then ");
  events = parser.Finish();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].text, "<|END_THI");
  EXPECT_EQ(events[1].kind, Kind::kFinish);
}

TEST(Command4ParserTest, ArgumentsStreamBeforeTheBlockEnds) {
  Command4Parser parser(Options(false));
  std::vector<Command4Event> events =
      parser.Feed("<|START_ACTION|>[{\"tool_name\": \"f\", \"parameters\": {\"text\": \"hel");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, Kind::kToolCallBegin);
  EXPECT_EQ(events[0].tool_name, "f");
  EXPECT_EQ(events[1].kind, Kind::kToolCallArguments);
  EXPECT_EQ(events[1].text, "{\"text\": \"hel");
}

TEST(Command4ParserTest, BadShapesAreErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"tool_name\": \"f\"}", "tool calls must be a JSON array"},
      {"[\"f\"]", "each tool call must be a JSON object"},
      {"[{\"parameters\": {}}]", "has no tool_name"},
      {"[{\"tool_name\": 3}]", "tool_name must be a string"},
      {"[{\"tool_name\": \"f\", \"parameters\": \"{}\"}]", "parameters must be a JSON object"},
  };
  for (const auto& [body, message] : cases) {
    Command4Output out =
        Command4Parser::ParseAll("<|START_ACTION|>" + body + "<|END_ACTION|>", Options(false));
    ASSERT_TRUE(out.error) << body;
    EXPECT_NE(out.error->find(message), std::string::npos) << *out.error;
    EXPECT_EQ(out.error_raw, body);
  }
}

TEST(Command4ParserTest, ToolIndexesContinueAcrossBlocks) {
  Command4Output out = Command4Parser::ParseAll(
      "<|START_ACTION|>[{\"tool_name\": \"a\", \"parameters\": {}}]<|END_ACTION|>"
      "<|START_ACTION|>[{\"tool_name\": \"b\", \"parameters\": {}}]<|END_ACTION|>",
      Options(false));
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[1].id, "call_1");
  EXPECT_EQ(out.tool_calls[1].name, "b");
}

TEST(Command4ParserTest, DefaultIdsAreRandomOpenAiIds) {
  const std::string text =
      "<|START_ACTION|>[{\"tool_name\": \"a\", \"parameters\": {}}]<|END_ACTION|>";
  Command4ParserOptions options;
  options.starts_in_reasoning = false;
  std::string first = Command4Parser::ParseAll(text, options).tool_calls.at(0).id;
  std::string second = Command4Parser::ParseAll(text, options).tool_calls.at(0).id;
  EXPECT_EQ(first.rfind("call_", 0), 0u);
  EXPECT_EQ(first.size(), 29u);
  EXPECT_NE(first, second);
}

TEST(Command4ParserTest, WhitespaceBetweenBlocksIsDropped) {
  Command4Output out =
      Command4Parser::ParseAll("r<|END_THINKING|>\n\n<|START_TEXT|>a<|END_TEXT|>\n", Options());
  EXPECT_EQ(out.reasoning, "r");
  EXPECT_EQ(out.content, "a");
}

}  // namespace
}  // namespace mkserve::chat

namespace mkserve::chat {
namespace {

// Random mixes of markers, JSON pieces and text: the parser never throws, always finishes, and
// the split-position property holds on inputs nobody wrote by hand.
TEST(Command4ParserTest, RandomInputsAreHandledAndSplitInvariant) {
  const std::vector<std::string> pieces = {
      "<|END_THINKING|>",
      "<|START_TEXT|>",
      "<|END_TEXT|>",
      "<|START_ACTION|>",
      "<|END_ACTION|>",
      "<|END_OF_TURN_TOKEN|>",
      "<|START_RESPONSE|>",
      "<|",
      "<|END_",
      "[",
      "]",
      "{",
      "}",
      "\"",
      "\\",
      "\"tool_name\"",
      "\"parameters\"",
      ":",
      ",",
      " ",
      "\n",
      "x",
      "é",
      "🦀",
      "1.5",
      "true",
      "null",
      "<",
  };
  std::mt19937 generator(1234);
  std::uniform_int_distribution<size_t> pick(0, pieces.size() - 1);
  std::uniform_int_distribution<int> length(1, 30);
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    for (int i = length(generator); i > 0; --i) text += pieces[pick(generator)];
    bool starts_in_reasoning = round % 2 == 0;
    std::string whole = Describe(FeedPieces({text}, starts_in_reasoning));
    std::uniform_int_distribution<size_t> split_at(0, text.size());
    for (int k = 0; k < 5; ++k) {
      size_t split = split_at(generator);
      ASSERT_EQ(
          Describe(FeedPieces({text.substr(0, split), text.substr(split)}, starts_in_reasoning)),
          whole)
          << Escape(text) << " split at " << split;
    }
  }
}

}  // namespace
}  // namespace mkserve::chat
