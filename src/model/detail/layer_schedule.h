// Derives the per-layer facts (attention kind, RoPE, window, FFN kind and width) from the
// config keys, the way HF Cohere2MoeConfig.__post_init__ and the modeling code do.
#pragma once

#include <vector>

#include "model/detail/config_reader.h"
#include "model/model_config.h"

namespace mkserve::detail {

// Reads layer_types / mlp_layer_types / first_k_dense_replace from `reader`; the scalar fields
// (patterns, window, widths, num_layers) must already be parsed into `config`.
std::vector<LayerSpec> DeriveLayerSpecs(const ConfigReader& reader, const ModelConfig& config);

}  // namespace mkserve::detail
