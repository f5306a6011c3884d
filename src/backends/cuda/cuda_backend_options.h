// CudaBackendOptions: how a CudaBackend is sized and which decode path it prefers.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "backends/cuda/core/device_weights.h"
#include "backends/cuda/core/step_hooks.h"
#include "backends/cuda/prefill/moe_grouped.h"
#include "engine/kv_layout.h"

namespace mkserve::cuda {

struct CudaBackendOptions {
  double gpu_memory_fraction = 0.9;   // weights + scratch + KV cache
  std::optional<KvLayout> kv_layout;  // exact KV pool (tests); otherwise sized from the fraction
  int64_t max_num_tokens = 8192;      // tokens per step (prefill chunk + decode rows)
  int64_t max_batch = 64;             // sequences per step the sliding pools must hold
  // > 0: prompt chunks of up to this many tokens run beside the steps on a second stream with
  // its own workspace of min(this, max_num_tokens) tokens (prefill/chunk_stream.h); 0: none.
  int64_t max_prompt_chunk_tokens = 0;
  // Which decode path runs decode rows: "layered" (captured CUDA graphs where the step allows,
  // else eager kernels) or a registered path's name ("eager", "graph", ...), tried first with
  // "eager" behind it (decode/decode_path_registry.h).
  std::string decode_path = "eager";
  // The megakernel decode path's schedule policy as JSON text (SchedulePolicy::FromJson, e.g.
  // from `--megakernel-policy FILE`); empty: its default.
  std::string megakernel_policy;
  // WarmUp: prepare the decode paths (capture graphs) for batch 1..max_batch at contexts up to
  // this many tokens, for at most warmup_seconds.
  int64_t warmup_context_tokens = 8192;
  double warmup_seconds = 120.0;
  // Steps of at least this many tokens run the MoE experts as tensor-core grouped GEMMs
  // (prefill/moe_grouped.h, where the default's measurements are); smaller ones stream each
  // expert through the decode GEMV.
  int64_t grouped_moe_min_tokens = kGroupedMoeMinTokens;
  bool random_weights = false;  // LoadCudaBackend: weights from the seed, not the checkpoint
  uint64_t seed = 0;
  UploadProgress progress;  // LoadCudaBackend: upload progress
  // Benchmarks and tests only (tools/tool_hooks.h): per-op timing, forced routing. Null when
  // serving.
  std::shared_ptr<StepHooks> hooks;
};

}  // namespace mkserve::cuda
