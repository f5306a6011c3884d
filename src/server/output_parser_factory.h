// Picks the OutputParser for the served model's chat format.
#pragma once

#include <functional>
#include <memory>

#include "server/output_parser.h"
#include "server/server_state.h"

namespace mkserve::server {

// A factory making one parser per choice. `thinking`: the prompt opened a reasoning block, so
// output starts inside it.
std::function<std::unique_ptr<OutputParser>()> MakeOutputParserFactory(const ServedModel& model,
                                                                       bool thinking);

}  // namespace mkserve::server
