#include "backends/cuda/core/device_weights.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/panel_pack.h"
#include "backends/cuda/core/random_fill.h"
#include "backends/cuda/core/weight_layout.h"
#include "common/error.h"
#include "common/float_convert.h"

namespace mkserve::cuda {
namespace {

constexpr int64_t kStagingElements = int64_t{32} << 20;  // 64 MiB of bf16
constexpr float kWeightStd = 0.02f;
constexpr float kNormMean = 1.0f;

// One source tensor and where its bf16 copy goes.
struct Piece {
  bf16* dst = nullptr;
  const TensorView* src = nullptr;
};

const bf16* At(bf16* base, int64_t offset) { return offset == kAbsent ? nullptr : base + offset; }

DeviceLayer PointLayer(const ModelConfig& config, int64_t layer_id, bf16* base) {
  LayerLayout layout = PlanLayerLayout(config, layer_id);
  DeviceLayer layer;
  layer.input_norm = At(base, layout.input_norm);
  layer.qkv = At(base, layout.qkv);
  layer.o_proj = At(base, layout.o_proj);
  layer.dense = {At(base, layout.dense_gate_up), At(base, layout.dense_down),
                 config.layers[layer_id].ffn_intermediate_size};
  layer.router = At(base, layout.router);
  layer.experts_gate_up = At(base, layout.experts_gate_up);
  layer.experts_down = At(base, layout.experts_down);
  layer.expert_intermediate = config.layers[layer_id].ffn_intermediate_size;
  layer.shared = {At(base, layout.shared_gate_up), At(base, layout.shared_down),
                  SharedExpertWidth(config)};
  layer.bytes = layout.total_elements * static_cast<int64_t>(sizeof(bf16));
  return layer;
}

void AppendMlp(const MlpWeights& mlp, bf16* gate_up, bf16* down, std::vector<Piece>* pieces) {
  const int64_t gate_elements = mlp.gate.num_elements();
  pieces->push_back({gate_up, &mlp.gate});
  pieces->push_back({gate_up + gate_elements, &mlp.up});
  pieces->push_back({down, &mlp.down});
}

// Every tensor of the layer but the routed experts, which UploadExperts packs into panels.
std::vector<Piece> LayerPieces(const ModelConfig& config, const LayerWeights& weights,
                               const DeviceLayer& layer) {
  std::vector<Piece> pieces;
  auto dst = [](const bf16* p) { return const_cast<bf16*>(p); };
  bf16* qkv = dst(layer.qkv);
  pieces.push_back({dst(layer.input_norm), &weights.input_norm});
  pieces.push_back({qkv, &weights.q_proj});
  pieces.push_back({qkv + weights.q_proj.num_elements(), &weights.k_proj});
  pieces.push_back(
      {qkv + weights.q_proj.num_elements() + weights.k_proj.num_elements(), &weights.v_proj});
  pieces.push_back({dst(layer.o_proj), &weights.o_proj});
  if (weights.dense)
    AppendMlp(*weights.dense, dst(layer.dense.gate_up), dst(layer.dense.down), &pieces);
  if (weights.router) pieces.push_back({dst(layer.router), &*weights.router});
  if (weights.shared_expert) {
    AppendMlp(*weights.shared_expert, dst(layer.shared.gate_up), dst(layer.shared.down), &pieces);
  }
  return pieces;
}

// Converts elements [first, first + count) of `src` into bf16 bits at `out`.
void ConvertToBf16(const TensorView& src, int64_t first, int64_t count, uint16_t* out) {
  const std::byte* bytes = src.bytes.data();
  switch (src.dtype) {
    case DType::kBF16:
      std::memcpy(out, bytes + first * 2, static_cast<size_t>(count) * 2);
      return;
    case DType::kF16:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t bits;
        std::memcpy(&bits, bytes + (first + i) * 2, 2);
        out[i] = FloatToBf16(F16ToFloat(bits));
      }
      return;
    case DType::kF32:
      for (int64_t i = 0; i < count; ++i) {
        float value;
        std::memcpy(&value, bytes + (first + i) * 4, 4);
        out[i] = FloatToBf16(value);
      }
      return;
    case DType::kF8E4M3:
      throw Error("tensor " + src.name +
                  ": FP8 checkpoints are not supported by the CUDA backend yet (use BF16)");
  }
}

// Lowers *first_bad to `piece` when a bf16 of `data` is a NaN or an infinity (exponent all ones).
__global__ void FlagNonFinite(const uint16_t* data, int64_t count, int piece, int* first_bad) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if ((data[i] & 0x7f80) == 0x7f80) {
      atomicMin(first_bad, piece);
      return;
    }
  }
}

// Pinned staging buffer: each chunk is converted into it, then copied; the copy finishes before
// the buffer is refilled, so host memory use stays at one chunk whatever the model size. Every
// copied chunk is checked on the GPU for NaN and infinite values (a damaged checkpoint would
// otherwise serve garbage without an error); ThrowIfNonFinite names the first such tensor.
class Stager {
 public:
  Stager() {
    MKSERVE_CUDA_CHECK(cudaMallocHost(&staging_, kStagingElements * sizeof(uint16_t)));
    const int none = kNoneBad;
    MKSERVE_CUDA_CHECK(cudaMemcpy(first_bad_.data(), &none, sizeof(int), cudaMemcpyHostToDevice));
  }
  ~Stager() { cudaFreeHost(staging_); }
  Stager(const Stager&) = delete;
  Stager& operator=(const Stager&) = delete;

  int64_t Copy(const Piece& piece) {
    const int64_t total = piece.src->num_elements();
    const int index = static_cast<int>(names_.size());
    names_.push_back(piece.src->name);
    for (int64_t first = 0; first < total; first += kStagingElements) {
      int64_t count = std::min(kStagingElements, total - first);
      ConvertToBf16(*piece.src, first, count, staging_);
      MKSERVE_CUDA_CHECK(cudaMemcpy(piece.dst + first, staging_, count * sizeof(uint16_t),
                                    cudaMemcpyHostToDevice));
      FlagNonFinite<<<264, 256>>>(reinterpret_cast<const uint16_t*>(piece.dst + first), count,
                                  index, first_bad_.data());
      MKSERVE_CUDA_CHECK_LAUNCH();
    }
    return total * static_cast<int64_t>(sizeof(bf16));
  }

  void ThrowIfNonFinite() {
    int first_bad = kNoneBad;
    MKSERVE_CUDA_CHECK(
        cudaMemcpy(&first_bad, first_bad_.data(), sizeof(int), cudaMemcpyDeviceToHost));
    if (first_bad != kNoneBad) {
      throw Error("tensor '" + names_[static_cast<size_t>(first_bad)] +
                  "' holds NaN or infinite values: the checkpoint is damaged");
    }
  }

 private:
  static constexpr int kNoneBad = std::numeric_limits<int>::max();
  uint16_t* staging_ = nullptr;
  DeviceBuffer<int> first_bad_{1};
  std::vector<std::string> names_;  // by piece index, for the error
};

// Each routed expert lands row-major in `scratch` (2 * width * hidden), then is packed into its
// panels; the copies after a pack wait for it (both on the legacy default stream).
int64_t UploadExperts(const ModelConfig& config, const LayerWeights& weights,
                      const DeviceLayer& layer, Stager& stager, DeviceBuffer<bf16>& scratch) {
  const int64_t hidden = config.hidden_size, width = layer.expert_intermediate;
  const PanelMatrix gate_up = ExpertGateUpPanels(hidden, width);
  const PanelMatrix down = ExpertDownPanels(hidden, width);
  int64_t bytes = 0;
  for (size_t e = 0; e < weights.experts.size(); ++e) {
    const MlpWeights& expert = weights.experts[e];
    bytes += stager.Copy({scratch.data(), &expert.gate});
    bytes += stager.Copy({scratch.data() + expert.gate.num_elements(), &expert.up});
    PackPanels(scratch.data(), gate_up, 1,
               const_cast<bf16*>(layer.experts_gate_up) + e * gate_up.Elements(), 0);
    bytes += stager.Copy({scratch.data(), &expert.down});
    PackPanels(scratch.data(), down, 1, const_cast<bf16*>(layer.experts_down) + e * down.Elements(),
               0);
  }
  MKSERVE_CUDA_CHECK(cudaDeviceSynchronize());
  return bytes;
}

}  // namespace

DeviceWeights DeviceWeights::Allocate(const ModelConfig& config, bool tied_head) {
  DeviceWeights weights;
  const int64_t hidden = config.hidden_size;
  weights.embed_ = DeviceBuffer<bf16>(config.vocab_size * hidden);
  weights.final_norm_ = DeviceBuffer<bf16>(hidden);
  weights.total_bytes_ = weights.embed_.bytes() + weights.final_norm_.bytes();
  if (!tied_head) {
    weights.lm_head_storage_ = DeviceBuffer<bf16>(config.vocab_size * hidden);
    weights.lm_head_ = weights.lm_head_storage_.data();
    weights.total_bytes_ += weights.lm_head_storage_.bytes();
  }
  for (int64_t l = 0; l < config.num_layers; ++l) {
    weights.layer_storage_.emplace_back(PlanLayerLayout(config, l).total_elements);
    weights.layers_.push_back(PointLayer(config, l, weights.layer_storage_.back().data()));
    weights.total_bytes_ += weights.layers_.back().bytes;
  }
  return weights;
}

DeviceWeights DeviceWeights::Upload(const ModelConfig& config, const ModelWeights& host,
                                    const UploadProgress& progress) {
  if (static_cast<int64_t>(host.layers.size()) != config.num_layers) {
    throw Error("DeviceWeights::Upload: weights have " + std::to_string(host.layers.size()) +
                " layers, config says " + std::to_string(config.num_layers));
  }
  const bool tied = host.lm_head.bytes.data() == host.embed_tokens.bytes.data();
  DeviceWeights weights = Allocate(config, tied);
  std::vector<Piece> pieces = {{weights.embed_.data(), &host.embed_tokens},
                               {weights.final_norm_.data(), &host.final_norm}};
  if (!tied) pieces.push_back({weights.lm_head_storage_.data(), &host.lm_head});
  for (int64_t l = 0; l < config.num_layers; ++l) {
    std::vector<Piece> layer = LayerPieces(config, host.layers[l], weights.layers_[l]);
    pieces.insert(pieces.end(), layer.begin(), layer.end());
  }
  Stager stager;
  int64_t done = 0;
  auto copied = [&](int64_t bytes) {
    done += bytes;
    if (progress) progress(done, weights.total_bytes_);
  };
  for (const Piece& piece : pieces) copied(stager.Copy(piece));
  int64_t widest = 0;  // of the routed experts: their scratch is sized once
  for (int64_t l = 0; l < config.num_layers; ++l) {
    if (!host.layers[l].experts.empty())
      widest = std::max(widest, weights.layers_[l].expert_intermediate);
  }
  if (widest > 0) {
    DeviceBuffer<bf16> scratch(2 * widest * config.hidden_size);
    for (int64_t l = 0; l < config.num_layers; ++l) {
      if (!host.layers[l].experts.empty()) {
        copied(UploadExperts(config, host.layers[l], weights.layers_[l], stager, scratch));
      }
    }
  }
  stager.ThrowIfNonFinite();
  return weights;
}

DeviceWeights DeviceWeights::Random(const ModelConfig& config, uint64_t seed) {
  DeviceWeights weights = Allocate(config, /*tied_head=*/true);
  const int64_t hidden = config.hidden_size;
  uint64_t stream_id = 0;
  FillNormal(weights.embed_.data(), weights.embed_.count(), 0.0f, kWeightStd, seed, stream_id++, 0);
  FillNormal(weights.final_norm_.data(), hidden, kNormMean, kWeightStd, seed, stream_id++, 0);
  for (int64_t l = 0; l < config.num_layers; ++l) {
    bf16* base = weights.layer_storage_[l].data();
    const LayerLayout layout = PlanLayerLayout(config, l);
    // Fill the whole layer with weights, then overwrite the norm with values near 1.
    FillNormal(base, layout.total_elements, 0.0f, kWeightStd, seed, stream_id++, 0);
    FillNormal(base + layout.input_norm, hidden, kNormMean, kWeightStd, seed, stream_id++, 0);
  }
  MKSERVE_CUDA_CHECK(cudaDeviceSynchronize());
  return weights;
}

}  // namespace mkserve::cuda
