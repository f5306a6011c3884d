// Picks the OutputParser for the served model's chat format.
#pragma once

#include <functional>
#include <memory>

#include "server/output_parser.h"
#include "server/server_state.h"

namespace mkserve::server {

// Whether the served model talks in Cohere's Command-4 format (its template writes both block
// markers, the test llama.cpp uses too).
bool IsCommand4Template(const chat::ChatTemplate& chat_template);

// A factory making one parser per choice. `thinking`: the prompt opened a reasoning block, so
// output starts inside it.
std::function<std::unique_ptr<OutputParser>()> MakeOutputParserFactory(const ServedModel& model,
                                                                       bool thinking);

}  // namespace mkserve::server
