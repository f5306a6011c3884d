// libFuzzer target for the Command-4 output parser, which reads whatever the model writes.
// Input: byte 0 picks where the prompt left the model and which tools may be called; in the
// rest, bytes 0x01-0x09 stand for the nine markers (so the fuzzer reaches them easily) and 0x0b
// cuts a delta. Checked: streaming the deltas gives the same reasoning, content and tool calls as
// ParseAll over the whole text (the header's promise), and when every delta is valid UTF-8 so is
// every event (each becomes one JSON string of a stream chunk).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "chat/command4_parser.h"
#include "common/utf8.h"

namespace {

// Names the broken promise, then aborts (libFuzzer keeps the input).
[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "%s\n", what);
  std::abort();
}

using mkserve::chat::Command4Event;
using mkserve::chat::Command4Output;
using mkserve::chat::Command4Parser;
using mkserve::chat::Command4ParserOptions;
using mkserve::chat::Command4Start;

mkserve::chat::Command4ParserOptions Options(uint8_t selector) {
  Command4ParserOptions options;
  options.start = selector % 3 == 0   ? Command4Start::kReasoning
                  : selector % 3 == 1 ? Command4Start::kAnswer
                                      : Command4Start::kText;
  switch (selector / 3 % 3) {
    case 0:
      break;  // any tool
    case 1:
      options.allowed_tools = std::set<std::string>{};
      break;
    case 2:
      options.allowed_tools = std::set<std::string>{"f", "get_weather"};
      break;
  }
  options.make_tool_call_id = [](int index) { return "call_" + std::to_string(index); };
  return options;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto markers = mkserve::chat::Command4Markers();
  std::vector<std::string> deltas(1);
  for (size_t i = 1; i < size; ++i) {
    const uint8_t byte = data[i];
    if (byte >= 1 && byte <= markers.size()) {
      deltas.back() += markers[byte - 1];
    } else if (byte == 0x0b) {
      deltas.emplace_back();
    } else {
      deltas.back() += static_cast<char>(byte);
    }
  }
  std::string whole;
  bool deltas_valid_utf8 = true;
  for (const std::string& delta : deltas) {
    whole += delta;
    deltas_valid_utf8 = deltas_valid_utf8 && mkserve::IsValidUtf8(delta);
  }

  Command4Parser parser(Options(data[0]));
  std::vector<Command4Event> events;
  for (const std::string& delta : deltas) {
    for (Command4Event& event : parser.Feed(delta)) events.push_back(std::move(event));
  }
  for (Command4Event& event : parser.Finish()) events.push_back(std::move(event));
  if (events.empty() || events.back().kind != Command4Event::Kind::kFinish) {
    Fail("Finish did not end with kFinish");
  }

  Command4Output streamed;
  for (const Command4Event& event : events) {
    if (deltas_valid_utf8 && !mkserve::IsValidUtf8(event.text)) {
      Fail("an event is not valid UTF-8 though every delta was");
    }
    switch (event.kind) {
      case Command4Event::Kind::kReasoning:
        streamed.reasoning += event.text;
        break;
      case Command4Event::Kind::kContent:
        streamed.content += event.text;
        break;
      case Command4Event::Kind::kToolCallBegin:
        if (event.tool_index != static_cast<int>(streamed.tool_calls.size())) {
          Fail("tool calls out of order");
        }
        streamed.tool_calls.push_back({event.tool_call_id, event.tool_name, ""});
        break;
      case Command4Event::Kind::kToolCallArguments:
        if (event.tool_index + 1 != static_cast<int>(streamed.tool_calls.size())) {
          Fail("arguments of a call that is not the last begun");
        }
        streamed.tool_calls.back().arguments += event.text;
        break;
      case Command4Event::Kind::kError:
      case Command4Event::Kind::kFinish:
        break;
    }
  }
  const Command4Output all = Command4Parser::ParseAll(whole, Options(data[0]));
  if (all.reasoning != streamed.reasoning) Fail("streamed reasoning differs from ParseAll's");
  if (all.content != streamed.content) Fail("streamed content differs from ParseAll's");
  if (all.tool_calls.size() != streamed.tool_calls.size()) Fail("a different number of calls");
  for (size_t i = 0; i < all.tool_calls.size(); ++i) {
    const auto& a = all.tool_calls[i];
    const auto& b = streamed.tool_calls[i];
    if (a.id != b.id || a.name != b.name || a.arguments != b.arguments) {
      Fail("a streamed call differs from ParseAll's");
    }
  }
  return 0;
}
