// Test helper (not a CLI command): renders one chat template with a list of contexts.
//   chat_render_tool TEMPLATE_FILE CONTEXTS_JSON_FILE
// prints a JSON array with {"output": "..."} or {"error": "..."} per context, in order.
//   chat_render_tool --print-command4-template
// prints the built-in Command-4 template source, so other renderers can check it too.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "chat/chat_template.h"
#include "chat/command4_template.h"
#include "common/error.h"

namespace {

std::string ReadFile(const char* path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw mkserve::Error(std::string("cannot open ") + path);
  std::stringstream buffer;
  buffer << file.rdbuf();
  return buffer.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--print-command4-template") {
    std::cout << mkserve::chat::Command4TemplateSource();
    return 0;
  }
  if (argc != 3) {
    std::cerr << "usage: chat_render_tool TEMPLATE_FILE CONTEXTS_JSON_FILE\n";
    return 2;
  }
  try {
    auto contexts = nlohmann::ordered_json::parse(ReadFile(argv[2]));
    nlohmann::ordered_json results = nlohmann::ordered_json::array();
    std::optional<mkserve::chat::ChatTemplate> chat_template;
    std::string parse_error;
    try {
      chat_template = mkserve::chat::ChatTemplate::Parse(ReadFile(argv[1]));
    } catch (const mkserve::Error& error) {
      parse_error = error.what();  // every context reports it, as a render would fail
    }
    for (const auto& context : contexts) {
      try {
        if (!chat_template) throw mkserve::Error(parse_error);
        results.push_back({{"output", chat_template->Render(context)}});
      } catch (const mkserve::Error& error) {
        results.push_back({{"error", error.what()}});
      }
    }
    std::cout << results.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
              << "\n";
  } catch (const std::exception& error) {
    std::cerr << "chat_render_tool: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
