// A tiny model's worth of device buffers for running megakernel ops alone: random bf16 weights
// and inputs (host copies kept for the CPU references), every output poisoned with NaN, and a
// launcher that runs hand-made task lists under the watchdog.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "backends/cuda/core/weight_layout.h"
#include "backends/cuda/gpu_test_util.h"
#include "megakernel/device/megakernel.h"
#include "megakernel/device/step_params.h"
#include "megakernel/device/step_watchdog.h"

namespace mkserve::megakernel::testing {

using cuda::DeviceBuffer;
using cuda::testing::RandomBf16Values;
using cuda::testing::ToDevice;
using cuda::testing::ToDeviceBf16;

inline TaskDescriptor Task(Opcode opcode, uint32_t layer = 0) {
  TaskDescriptor t{};
  t.opcode = opcode;
  t.layer = layer;
  t.wait0_counter = t.wait1_counter = t.signal_counter = kNoCounter;
  return t;
}

// Runs `lists` (one list per SM, the rest idle) and waits at most 10 s.
inline void RunLists(const StepParams& params, std::vector<std::vector<TaskDescriptor>> lists,
                     std::span<const CounterInfo> counters = {}) {
  const int sms = MegakernelGridSize();
  lists.resize(sms);
  size_t width = 1;
  for (const auto& list : lists) width = std::max(width, list.size());
  std::vector<TaskDescriptor> packed(sms * width, Task(kNop));
  std::vector<uint32_t> counts;
  for (int s = 0; s < sms; ++s) {
    std::copy(lists[s].begin(), lists[s].end(), packed.begin() + s * width);
    counts.push_back(static_cast<uint32_t>(lists[s].size()));
  }
  DeviceBuffer<TaskDescriptor> tasks = ToDevice(packed);
  DeviceBuffer<uint32_t> device_counts = ToDevice(counts);
  StepWatchdog watchdog;
  StepParams p = params;
  p.abort_flag = watchdog.device_flag();
  cudaEvent_t done;
  MKSERVE_CUDA_CHECK(cudaEventCreate(&done));
  watchdog.Arm();
  LaunchMegakernel(p, {tasks.data(), device_counts.data(), sms, static_cast<int32_t>(width)}, 0);
  MKSERVE_CUDA_CHECK(cudaEventRecord(done, 0));
  try {
    watchdog.Wait(done, std::chrono::milliseconds(10000), p.counters, counters, "test step");
  } catch (...) {
    cudaEventDestroy(done);
    throw;
  }
  MKSERVE_CUDA_CHECK(cudaEventDestroy(done));
  MKSERVE_CUDA_CHECK(cudaDeviceSynchronize());
}

// The tiny geometry: head_dim is the kernel's 128; everything else small.
struct TinyModel {
  static constexpr int kHidden = 256, kHeads = 4, kKvHeads = 2, kHeadDim = 128, kVocab = 1024;
  static constexpr int kExperts = 16, kTopK = 4, kExpertWidth = 64, kBatch = 11;

  std::vector<float> embed, norm_gamma, router, experts_gate_up, experts_down;
  std::vector<DeviceBuffer<bf16>> bf16s;
  std::vector<DeviceBuffer<float>> floats;
  std::vector<DeviceBuffer<int32_t>> ints;
  DeviceBuffer<LayerParams> layer_buffer;
  LayerParams layer;
  StepParams p;

  bf16* Bf16(const std::vector<float>& host) {
    bf16s.push_back(ToDeviceBf16(host));
    return bf16s.back().data();
  }
  float* Floats(int64_t n, float fill = NAN) {
    floats.push_back(ToDevice(std::vector<float>(n, fill)));
    return floats.back().data();
  }
  int32_t* Ints(int64_t n, int32_t fill = -7) {
    ints.push_back(ToDevice(std::vector<int32_t>(n, fill)));
    return ints.back().data();
  }

  int batch, top_k;  // rows and experts per row the buffers hold (defaults kBatch, kTopK)

  explicit TinyModel(int rows = kBatch, int experts_per_row = kTopK)
      : batch(rows), top_k(experts_per_row) {
    embed = RandomBf16Values(int64_t{kVocab} * kHidden, 1);
    norm_gamma = RandomBf16Values(kHidden, 2, 0.2f);
    for (float& g : norm_gamma) g = cuda::testing::RoundBf16(1.0f + g);
    router = RandomBf16Values(int64_t{kExperts} * kHidden, 3, 0.1f);
    experts_gate_up = RandomBf16Values(int64_t{kExperts} * 2 * kExpertWidth * kHidden, 4, 0.1f);
    experts_down = RandomBf16Values(int64_t{kExperts} * kHidden * kExpertWidth, 5, 0.1f);
    layer.input_norm = Bf16(norm_gamma);
    layer.router = Bf16(router);
    // The kernel reads projections in panels (weight_panels.h); the references read the
    // row-major vectors above.
    layer.experts_gate_up = Bf16(cuda::PackPanelsOnHost(
        experts_gate_up, cuda::ExpertGateUpPanels(kHidden, kExpertWidth), kExperts));
    layer.experts_down = Bf16(cuda::PackPanelsOnHost(
        experts_down, cuda::ExpertDownPanels(kHidden, kExpertWidth), kExperts));
    layer.intermediate = kExpertWidth;
    // Layer 1 has the same weights: ops of a second layer read its norm (the fused norm).
    layer_buffer = ToDevice(std::vector<LayerParams>{layer, layer});
    p.batch = batch;
    p.hidden = kHidden;
    p.num_heads = kHeads;
    p.num_kv_heads = kKvHeads;
    p.head_dim = kHeadDim;
    p.vocab = kVocab;
    p.num_experts = kExperts;
    p.top_k = top_k;
    p.num_layers = 1;
    p.logit_scale = 0.5f;
    p.layers = layer_buffer.data();
    p.embed = Bf16(embed);
    p.lm_head =
        Bf16(cuda::PackPanelsOnHost(embed, cuda::PanelMatrix::AdjacentRows(kVocab, kHidden)));
    p.final_norm = layer.input_norm;
    const int64_t B = batch, H = kHidden;
    p.residual = Floats(2 * B * H);  // the inputs of layer 0 and of what follows it
    p.x_norm = Bf16(std::vector<float>(B * H, NAN));
    p.x_norm_f32 = Floats(B * H);
    p.attn_out = Floats(B * H, 0.0f);
    p.ffn_out = Floats(B * H, 0.0f);
    p.router_logits = Floats(2 * B * kExperts, 0.0f);  // a block per layer (0 and 1)
    p.topk_ids = Ints(B * top_k);
    p.topk_weights = Floats(B * top_k);
    p.topk_slot = Ints(B * top_k);
    p.expert_counts = reinterpret_cast<uint32_t*>(Ints(kExperts, 0));
    p.bucket_offsets = Ints(kExperts + 1);
    p.bucket_assignment = Ints(B * top_k);
    p.routed_position = Ints(B * top_k);
    p.moe_hidden = Bf16(std::vector<float>(B * top_k * kExpertWidth, NAN));
    p.moe_out = Floats(B * top_k * H);
    p.logits = Floats(B * kVocab);
    p.max_splits = 4;
    // Two int32 a pick, a block per layer (0 and 1); last, so the tests' indices into `ints`
    // stay as they were.
    p.published_picks = reinterpret_cast<uint64_t*>(Ints(2 * 2 * B * top_k, 0));
  }
};

}  // namespace mkserve::megakernel::testing
