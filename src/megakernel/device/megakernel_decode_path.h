// MegakernelDecodePath: the CUDA backend's decode path that runs a whole decode step as one
// persistent kernel (MegakernelDecoder), registered under the name "megakernel". It serves plain
// decode plans of 1..kMaxMegakernelBatch rows on models the op bodies are written for; anything
// else (more rows, test hooks, an unsupported geometry) it declines, and the next path runs it.
#pragma once

#include <cstdint>
#include <memory>

#include "backends/cuda/decode/decode_path.h"
#include "model/model_config.h"

namespace mkserve::megakernel {

std::unique_ptr<cuda::DecodePath> MakeMegakernelDecodePath(const cuda::DecodePathContext& context);

// What the path allocates after the KV pool for `config`: its ProjectionPanels, or 0 for a model
// it declines.
int64_t MegakernelDecodePathBytes(const ModelConfig& config);

}  // namespace mkserve::megakernel
