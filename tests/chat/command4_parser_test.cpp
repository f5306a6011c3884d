// The Command-4 output parser, table-driven. Cases include the shapes exercised by Ollama's
// Command-4 (cohere2) parser tests and llama.cpp's / ik_llama.cpp's Command-R7B chat-parser tests
// (thinking then answer, legacy RESPONSE markers, single and parallel calls, pretty-printed
// blocks, partial output), restated here, plus mkserve's rules for disallowed and malformed calls.
// Every case is also fed split at every position and byte by byte: the result must not change.
#include "chat/command4_parser.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

namespace mkserve::chat {
namespace {

using Kind = Command4Event::Kind;
using Tools = std::optional<std::set<std::string>>;

constexpr Command4Start kOn = Command4Start::kReasoning;
constexpr Command4Start kOff = Command4Start::kAnswer;
constexpr Command4Start kPrefill = Command4Start::kText;
const Tools kAnyTool = std::nullopt;
const Tools kNoTools = std::set<std::string>{};

Command4ParserOptions Options(Command4Start start = kOn, Tools tools = kAnyTool) {
  Command4ParserOptions options;
  options.start = start;
  options.allowed_tools = std::move(tools);
  options.make_tool_call_id = [](int index) { return "call_" + std::to_string(index); };
  return options;
}

// Feeds `pieces` and merges the events, so that runs of deltas compare as whole strings.
std::vector<Command4Event> FeedPieces(const std::vector<std::string>& pieces,
                                      const Command4ParserOptions& options) {
  Command4Parser parser(options);
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
           " id=" + e.tool_call_id + " name=" + e.tool_name + " text=" + Escape(e.text) + "]\n";
  }
  return out;
}

struct Call {
  std::string name;
  std::string arguments;
};

struct Case {
  const char* name;
  std::string text;
  Command4Start start;
  Tools tools;
  std::string reasoning;
  std::string content;
  std::vector<Call> calls;
  bool rejects = false;  // an error event explains content that came from an action block
};

const std::string kWeather =
    R"({"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris"}})";
const std::string kAlarm =
    R"({"tool_call_id": "0", "tool_name": "set_alarm", "parameters": {"time": 15:30}})";
const std::string kRead =
    R"({"tool_call_id": "0", "tool_name": "read", "parameters": {"path": "a.txt"}})";

std::string Action(const std::string& body) { return "<|START_ACTION|>" + body + "<|END_ACTION|>"; }

const std::vector<Case>& Cases() {
  static const std::vector<Case> kCases = {
      // Reasoning and answers.
      {"reasoning_then_text",
       "I'm\nthinking<|END_THINKING|><|START_TEXT|>Hello, world!\nWhat's up?<|END_TEXT|>"
       "<|END_OF_TURN_TOKEN|>",
       kOn,
       kAnyTool,
       "I'm\nthinking",
       "Hello, world!\nWhat's up?",
       {}},
      {"legacy_response_markers",
       "<|START_THINKING|>I'm\nthinking<|END_THINKING|><|START_RESPONSE|>Hello, world!\nWhat's "
       "up?<|END_RESPONSE|>",
       kOff,
       kAnyTool,
       "I'm\nthinking",
       "Hello, world!\nWhat's up?",
       {}},
      {"reasoning_off_thinks_aloud",
       "I'm\nthinking<|END_THINKING|><|START_TEXT|>Hello<|END_TEXT|>",
       kOff,
       kAnyTool,
       "I'm\nthinking",
       "Hello",
       {}},
      {"reasoning_off_no_markers", "Just an answer.", kOff, kAnyTool, "", "Just an answer.", {}},
      {"reasoning_off_text_block",
       "<|START_TEXT|>Hi<|END_TEXT|><|END_OF_TURN_TOKEN|>",
       kOff,
       kAnyTool,
       "",
       "Hi",
       {}},
      {"reasoning_off_text_before_text_block",
       "Sure.<|START_TEXT|>Hi<|END_TEXT|>",
       kOff,
       kAnyTool,
       "",
       "Sure.Hi",
       {}},
      {"reasoning_on_truncated",
       "still thinking about",
       kOn,
       kAnyTool,
       "still thinking about",
       "",
       {}},
      {"prefill_continues_as_text",
       " the rest of it.<|END_TEXT|><|END_OF_TURN_TOKEN|>",
       kPrefill,
       kAnyTool,
       "",
       " the rest of it.",
       {}},
      {"prefill_keeps_whitespace",
       "\n  indented<|END_TEXT|>",
       kPrefill,
       kAnyTool,
       "",
       "\n  indented",
       {}},
      {"markup_that_is_not_a_marker",
       "Compare 2<3 and <b>tags</b> <| no.<|END_THINKING|><|START_TEXT|>4 < 5<|END_TEXT|>",
       kOn,
       kAnyTool,
       "Compare 2<3 and <b>tags</b> <| no.",
       "4 < 5",
       {}},
      {"partial_marker_at_end",
       "thinking then <|END_THI",
       kOn,
       kAnyTool,
       "thinking then <|END_THI",
       "",
       {}},
      {"whitespace_between_blocks",
       "r<|END_THINKING|>\n\n<|START_TEXT|>a<|END_TEXT|>\n",
       kOn,
       kAnyTool,
       "r",
       "a",
       {}},
      {"text_after_end_of_turn_ignored",
       "<|START_TEXT|>done<|END_TEXT|><|END_OF_TURN_TOKEN|>more",
       kOff,
       kAnyTool,
       "",
       "done",
       {}},
      {"stray_end_action_dropped",
       "<|START_TEXT|>a<|END_TEXT|><|END_ACTION|>b",
       kOff,
       kAnyTool,
       "",
       "ab",
       {}},
      // Tool calls.
      {"single_call",
       "I should call it.<|END_THINKING|>" + Action("[" + kWeather + "]"),
       kOn,
       kAnyTool,
       "I should call it.",
       "",
       {{"get_weather", R"({"city": "Paris"})"}}},
      {"r7b_style_call",
       "<|START_THINKING|>I'm\nthinking<|END_THINKING|>" +
           Action(
               R"([{"tool_call_id": "0", "tool_name": "special_function", "parameters": {"arg1": 1}}])"),
       kOff,
       kAnyTool,
       "I'm\nthinking",
       "",
       {{"special_function", R"({"arg1": 1})"}}},
      {"parallel_calls_pretty_printed",
       "<|END_THINKING|>" +
           Action("[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"special_function\", "
                  "\"parameters\": {\"arg1\": 1}},\n    {\"tool_call_id\": \"1\", \"tool_name\": "
                  "\"special_function_with_opt\", \"parameters\": {\"arg1\": 1, \"arg2\": 2}}\n]"),
       kOn,
       kAnyTool,
       "",
       "",
       {{"special_function", R"({"arg1": 1})"},
        {"special_function_with_opt", R"({"arg1": 1, "arg2": 2})"}}},
      {"numbers_and_literals_in_arguments",
       Action(R"([{"tool_name": "b", "parameters": {"x": [1, 2.5e3, -0.1, true, null]}}])"),
       kOff,
       kAnyTool,
       "",
       "",
       {{"b", R"({"x": [1, 2.5e3, -0.1, true, null]})"}}},
      {"parameters_before_name",
       Action(R"([{"parameters": {"a": {"b": 1}}, "tool_call_id": "0", "tool_name": "late"}])"),
       kOff,
       kAnyTool,
       "",
       "",
       {{"late", R"({"a": {"b": 1}})"}}},
      {"no_parameters_key",
       Action(R"([{"tool_call_id": "0", "tool_name": "now"}])"),
       kOff,
       kAnyTool,
       "",
       "",
       {{"now", "{}"}}},
      {"markers_inside_strings",
       Action(
           R"J([{"tool_name": "run", "parameters": {"code": "print(\"<|END_ACTION|>\")", "end": "<|END_OF_TURN_TOKEN|>", "k": "}]"}}])J"),
       kOff,
       kAnyTool,
       "",
       "",
       {{"run",
         R"J({"code": "print(\"<|END_ACTION|>\")", "end": "<|END_OF_TURN_TOKEN|>", "k": "}]"})J"}}},
      {"unicode",
       "日本語で考える 🦀<|END_THINKING|>" +
           Action(R"([{"tool_name": "café", "parameters": {"q": "☕ naïve", "e": "\u00e9"}}])"),
       kOn,
       kAnyTool,
       "日本語で考える 🦀",
       "",
       {{"café", R"({"q": "☕ naïve", "e": "\u00e9"})"}}},
      {"escaped_name",
       Action(R"([{"tool_name": "a\"b", "parameters": {}}])"),
       kOff,
       kAnyTool,
       "",
       "",
       {{"a\"b", "{}"}}},
      {"text_then_call",
       "r<|END_THINKING|><|START_TEXT|>Let me check.<|END_TEXT|>" + Action("[" + kWeather + "]"),
       kOn,
       kAnyTool,
       "r",
       "Let me check.",
       {{"get_weather", R"({"city": "Paris"})"}}},
      {"calls_numbered_across_blocks",
       Action(R"([{"tool_name": "a", "parameters": {}}])") +
           Action(R"([{"tool_name": "b", "parameters": {}}])"),
       kOff,
       kAnyTool,
       "",
       "",
       {{"a", "{}"}, {"b", "{}"}}},
      {"empty_block", Action("[]") + "<|START_TEXT|>ok<|END_TEXT|>", kOff, kAnyTool, "", "ok", {}},
      {"declared_tool_allowed",
       Action("[" + kWeather + "]"),
       kOff,
       std::set<std::string>{"get_weather"},
       "",
       "",
       {{"get_weather", R"({"city": "Paris"})"}}},
      // Calls the request does not allow come back as text.
      {"undeclared_tool_is_content",
       Action("[" + kRead + "]"),
       kOff,
       std::set<std::string>{"write"},
       "",
       kRead,
       {},
       true},
      {"undeclared_and_declared_siblings",
       Action("[" + kRead +
              R"(, {"tool_call_id": "1", "tool_name": "write", "parameters": {"path": "b"}}])"),
       kOff,
       std::set<std::string>{"write"},
       "",
       kRead,
       {{"write", R"({"path": "b"})"}},
       true},
      {"no_tools_block_body_is_content",
       "r<|END_THINKING|>" + Action("[" + kRead + "]"),
       kOn,
       kNoTools,
       "r",
       "[" + kRead + "]",
       {}},
      {"no_tools_text_and_block",
       "<|START_TEXT|>Title<|END_TEXT|>" + Action("[" + kRead + "]") + "<|END_OF_TURN_TOKEN|>",
       kOff,
       kNoTools,
       "",
       "Title[" + kRead + "]",
       {}},
      // Malformed blocks: never a call with invalid arguments, never a call twice.
      {"malformed_arguments", Action("[" + kAlarm + "]"), kOff, kAnyTool, "", kAlarm, {}, true},
      {"malformed_then_valid_sibling",
       Action("[" + kAlarm +
              R"(, {"tool_call_id": "1", "tool_name": "get_time", "parameters": {}}])"),
       kOff,
       kAnyTool,
       "",
       kAlarm,
       {{"get_time", "{}"}},
       true},
      {"valid_then_malformed_sibling",
       Action("[" + kWeather + ",\n    " + kAlarm + "\n]"),
       kOff,
       kAnyTool,
       "",
       kAlarm,
       {{"get_weather", R"({"city": "Paris"})"}},
       true},
      {"truncated_call",
       Action("").substr(0, 16) + R"([{"tool_name": "f", "parameters": {"a": 1)",
       kOff,
       kAnyTool,
       "",
       R"({"tool_name": "f", "parameters": {"a": 1)",
       {},
       true},
      {"name_not_a_string",
       Action(R"([{"tool_name": 3, "parameters": {}}])"),
       kOff,
       kAnyTool,
       "",
       R"({"tool_name": 3, "parameters": {}})",
       {},
       true},
      {"parameters_not_an_object",
       Action(R"([{"tool_name": "f", "parameters": "{}"}])"),
       kOff,
       kAnyTool,
       "",
       R"({"tool_name": "f", "parameters": "{}"})",
       {},
       true},
      {"call_without_name",
       Action(R"([{"parameters": {}}])"),
       kOff,
       kAnyTool,
       "",
       R"({"parameters": {}})",
       {},
       true},
      {"lone_call_object",
       Action(R"({"tool_call_id": "0", "tool_name": "f", "parameters": {}})"),
       kOff,
       kAnyTool,
       "",
       "",
       {{"f", "{}"}}},
      {"block_not_json", Action(R"("f")"), kOff, kAnyTool, "", R"("f")", {}, true},
      {"markup_inside_the_block",
       "Plan.<|END_THINKING|>" +
           Action("[\n    <write_to_file>\n<path>t.py</path>\n</write_to_file>\n]"),
       kOn,
       kAnyTool,
       "Plan.",
       "[\n    <write_to_file>\n<path>t.py</path>\n</write_to_file>\n]",
       {},
       true},
      {"element_not_an_object", Action(R"(["f"])"), kOff, kAnyTool, "", R"(["f"])", {}, true},
      {"non_object_between_calls",
       Action("[" + kWeather +
              R"(, 5, {"tool_call_id": "1", "tool_name": "now", "parameters": {}}])"),
       kOff,
       kAnyTool,
       "",
       "5",
       {{"get_weather", R"({"city": "Paris"})"}, {"now", "{}"}},
       true},
      {"text_after_the_array",
       Action("[" + kWeather + "] oops"),
       kOff,
       kAnyTool,
       "",
       "oops",
       {{"get_weather", R"({"city": "Paris"})"}},
       true},
  };
  return kCases;
}

struct Result {
  std::string reasoning;
  std::string content;
  std::vector<Call> calls;
  bool rejects = false;
};

Result Collect(const std::vector<Command4Event>& events) {
  Result result;
  for (const Command4Event& event : events) {
    switch (event.kind) {
      case Kind::kReasoning:
        result.reasoning += event.text;
        break;
      case Kind::kContent:
        result.content += event.text;
        break;
      case Kind::kToolCallBegin:
        EXPECT_EQ(event.tool_call_id, "call_" + std::to_string(result.calls.size()));
        result.calls.push_back({event.tool_name, ""});
        break;
      case Kind::kToolCallArguments:
        result.calls.at(event.tool_index).arguments += event.text;
        break;
      case Kind::kError:
        result.rejects = true;
        break;
      case Kind::kFinish:
        break;
    }
  }
  return result;
}

TEST(Command4ParserTest, Cases) {
  ASSERT_GE(Cases().size(), 30u);
  for (const Case& c : Cases()) {
    Result result = Collect(FeedPieces({c.text}, Options(c.start, c.tools)));
    EXPECT_EQ(result.reasoning, c.reasoning) << c.name;
    EXPECT_EQ(result.content, c.content) << c.name;
    EXPECT_EQ(result.rejects, c.rejects) << c.name;
    ASSERT_EQ(result.calls.size(), c.calls.size()) << c.name;
    for (size_t i = 0; i < c.calls.size(); ++i) {
      EXPECT_EQ(result.calls[i].name, c.calls[i].name) << c.name;
      EXPECT_EQ(result.calls[i].arguments, c.calls[i].arguments) << c.name;
      // Arguments are always a JSON object, and a call never also shows up in the content.
      EXPECT_TRUE(nlohmann::json::parse(result.calls[i].arguments).is_object()) << c.name;
      EXPECT_EQ(result.content.find("\"tool_name\": \"" + c.calls[i].name + "\""),
                std::string::npos)
          << c.name;
    }
  }
}

// The point of the streaming design: wherever the deltas split, the merged events are equal.
TEST(Command4ParserTest, EverySplitPositionGivesTheSameEvents) {
  for (const Case& c : Cases()) {
    Command4ParserOptions options = Options(c.start, c.tools);
    std::string whole = Describe(FeedPieces({c.text}, options));
    for (size_t split = 0; split <= c.text.size(); ++split) {
      ASSERT_EQ(Describe(FeedPieces({c.text.substr(0, split), c.text.substr(split)}, options)),
                whole)
          << c.name << " split at " << split;
    }
    std::vector<std::string> bytes;
    for (char ch : c.text) bytes.emplace_back(1, ch);
    EXPECT_EQ(Describe(FeedPieces(bytes, options)), whole) << c.name << " byte by byte";
  }
}

TEST(Command4ParserTest, ParseAllCollectsTheSame) {
  Command4Output out = Command4Parser::ParseAll(
      "r<|END_THINKING|>" +
          Action("[" + kAlarm + ", " + kWeather.substr(0, 1) + kWeather.substr(1) + "]"),
      Options());
  EXPECT_EQ(out.reasoning, "r");
  EXPECT_EQ(out.content, kAlarm);
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].id, "call_0");
  EXPECT_EQ(out.tool_calls[0].arguments, R"({"city": "Paris"})");
  ASSERT_EQ(out.errors.size(), 1u);
  EXPECT_NE(out.errors[0].find("invalid tool call JSON"), std::string::npos) << out.errors[0];
}

TEST(Command4ParserTest, RejectionsSayWhy) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("f")", "tool calls must be a JSON array"},
      {R"(["f"])", "each tool call must be a JSON object"},
      {R"([{"parameters": {}}])", "has no tool_name"},
      {R"([{"tool_name": 3}])", "tool_name must be a string"},
      {R"([{"tool_name": "f", "parameters": "{}"}])", "parameters must be a JSON object"},
      {R"([{"tool_name": "read", "parameters": {}}])", "'read', a tool the request did not offer"},
      {R"([{"tool_name": "f", "parameters": {"a": 1)", "ends before it is complete"},
  };
  for (const auto& [body, message] : cases) {
    Command4Output out = Command4Parser::ParseAll("<|START_ACTION|>" + body,
                                                  Options(kOff, std::set<std::string>{"f"}));
    ASSERT_EQ(out.errors.size(), 1u) << body;
    EXPECT_NE(out.errors[0].find(message), std::string::npos) << out.errors[0];
    EXPECT_TRUE(out.tool_calls.empty()) << body;
  }
}

TEST(Command4ParserTest, ACallIsReleasedWhenItsObjectCloses) {
  Command4Parser parser(Options(kOff));
  EXPECT_TRUE(
      parser.Feed(R"(<|START_ACTION|>[{"tool_name": "f", "parameters": {"text": "hel)").empty());
  std::vector<Command4Event> events = parser.Feed(R"(lo"}})");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, Kind::kToolCallBegin);
  EXPECT_EQ(events[0].tool_name, "f");
  EXPECT_EQ(events[1].kind, Kind::kToolCallArguments);
  EXPECT_EQ(events[1].text, R"({"text": "hello"})");
}

TEST(Command4ParserTest, ReasoningOffTextIsHeldUntilTheFirstMarker) {
  Command4Parser parser(Options(kOff));
  EXPECT_TRUE(parser.Feed("maybe thinking").empty());
  std::vector<Command4Event> events = parser.Feed("<|START_TEXT|>Hi");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::kContent);
  EXPECT_EQ(events[0].text, "maybe thinkingHi");
}

TEST(Command4ParserTest, DefaultIdsAreRandomOpenAiIds) {
  const std::string text = Action(R"([{"tool_name": "a", "parameters": {}}])");
  Command4ParserOptions options;
  options.start = kOff;
  std::string first = Command4Parser::ParseAll(text, options).tool_calls.at(0).id;
  std::string second = Command4Parser::ParseAll(text, options).tool_calls.at(0).id;
  EXPECT_EQ(first.rfind("call_", 0), 0u);
  EXPECT_EQ(first.size(), 29u);
  EXPECT_NE(first, second);
}

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
      "\"tool_call_id\"",
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
      "\"f\"",
  };
  const std::vector<Tools> tool_sets = {kAnyTool, kNoTools, std::set<std::string>{"f"}};
  std::mt19937 generator(1234);
  std::uniform_int_distribution<size_t> pick(0, pieces.size() - 1);
  std::uniform_int_distribution<int> length(1, 30);
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    for (int i = length(generator); i > 0; --i) text += pieces[pick(generator)];
    Command4ParserOptions options =
        Options(static_cast<Command4Start>(round % 3), tool_sets[round % 3]);
    std::vector<Command4Event> events = FeedPieces({text}, options);
    std::string whole = Describe(events);
    Result result = Collect(events);
    for (const Call& call : result.calls) {
      EXPECT_TRUE(nlohmann::json::parse(call.arguments).is_object()) << Escape(text);
    }
    std::uniform_int_distribution<size_t> split_at(0, text.size());
    for (int k = 0; k < 5; ++k) {
      size_t split = split_at(generator);
      ASSERT_EQ(Describe(FeedPieces({text.substr(0, split), text.substr(split)}, options)), whole)
          << Escape(text) << " split at " << split;
    }
  }
}

}  // namespace
}  // namespace mkserve::chat
