// Which models the megakernel runs: the shapes its op bodies are written for. Plain C++, so the
// CPU-only build (serve's choice of decode path, `mkserve megakernel-schedule`) can ask too.
#pragma once

#include <optional>
#include <string>

#include "model/model_config.h"

namespace mkserve::megakernel {

// Why the megakernel cannot run `config`, or nullopt when it can.
std::optional<std::string> MegakernelUnsupportedReason(const ModelConfig& config);

}  // namespace mkserve::megakernel
