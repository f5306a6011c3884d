// The registered decode paths, by name, and the preference order a CudaBackendOptions::decode_path
// selects. A path (the megakernel is one) is one entry in the table of decode_path_registry.cpp.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cuda/decode/decode_path.h"

namespace mkserve::cuda {

// "layered": graph where the step allows, else eager.
inline constexpr std::string_view kLayeredDecode = "layered";

// Every registered path's name, in registration order ("eager", "graph", ...).
std::vector<std::string> DecodePathNames();

// Throws mkserve::Error naming the registered paths unless `choice` is "layered" or one of them.
void CheckDecodePathChoice(std::string_view choice);

// The paths to try, first to last, for `choice`: "layered" gives graph then eager; a path's name
// gives that path then eager (which serves every decode plan of up to kLogitRowsPerChunk rows).
std::vector<std::unique_ptr<DecodePath>> MakeDecodePaths(std::string_view choice,
                                                         const DecodePathContext& context);

// Device memory the paths MakeDecodePaths(choice) makes allocate beyond the context's buffers
// (the megakernel's panel copies): the KV pool is sized to leave it free.
int64_t DecodePathBytes(std::string_view choice, const ModelConfig& config);

}  // namespace mkserve::cuda
