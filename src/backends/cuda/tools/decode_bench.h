// The decode and prefill measurements of `mkserve bench` (docs/speed-of-light.md): step time of
// the layered path per (batch, context) with the KV cache filled with random values, the bytes a
// step must stream, and the speed-of-light those bytes allow at the measured read bandwidth.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"

namespace mkserve::cuda {

struct DecodePoint {
  // "layered" (eager kernels), "layered+graphs" (graphs where possible) or the decode path's
  // name, then DecodeModeSuffix.
  std::string path;
  int64_t batch = 0;
  int64_t context_tokens = 0;
  double step_ms = 0.0;  // median wall time of Step(), host planning and sync included
  // Median time of a step started before the previous one is read (the engine's decode
  // lookahead, --decode-lookahead), where the backend starts steps that way; else 0.
  double ahead_step_ms = 0.0;
  double tokens_per_second = 0.0;
  double bytes_per_step = 0.0;
  int64_t distinct_experts = 0;  // of the last MoE layer, used for every MoE layer
  double sol_tokens_per_second = 0.0;
  double percent_of_sol = 0.0;
};

struct PrefillPoint {
  int64_t prompt_tokens = 0;
  double ms = 0.0;  // median, whole prompt (chunked by max_num_tokens)
  double tokens_per_second = 0.0;
};

// One decode token for each of `batch` sequences at position `context_tokens`, every one sampled
// with `sampling`: distinct tokens, or with `same_token` one token for every row, so every row
// routes to the same experts (the most skewed MoE load). StepInputs views the other members, so
// the struct stays put (unique_ptr).
struct DecodeBatch {
  std::vector<int32_t> tokens;
  std::vector<std::vector<std::vector<int32_t>>> tables;  // [seq][group][page]
  SamplingParams sampling;
  StepInputs inputs;
};

std::unique_ptr<DecodeBatch> MakeDecodeBatch(const CudaBackend& backend, int64_t batch,
                                             int64_t context_tokens,
                                             const SamplingParams& sampling = GreedyParams(),
                                             bool same_token = false);

// The label suffix of a bench run's mode: "+sampled" when not greedy, "+same-token".
std::string DecodeModeSuffix(const SamplingParams& sampling, bool same_token);

// What `mkserve bench --sampling sampled` decodes with: a typical chat setting on the GPU sampler.
SamplingParams BenchSampledParams();

// bytes(step) of docs/speed-of-light.md.
double DecodeStepBytes(const ModelConfig& config, int64_t batch, int64_t context_tokens,
                       int64_t distinct_experts);

// The point's distinct experts, bytes per step, SoL tok/s and % of SoL at that expert count.
void SetSpeedOfLight(DecodePoint& point, const ModelConfig& config, int64_t distinct_experts,
                     double read_bytes_per_second);

// The experts the point's batch routes to, from one step of the same inputs on the backend's
// current decode path, which must be a layered one (only its kernels leave the routing where
// CountDistinctExperts reads it).
int64_t CountRoutedExperts(CudaBackend& backend, const DecodePoint& point,
                           const SamplingParams& sampling, bool same_token);

DecodePoint BenchDecode(CudaBackend& backend, int64_t batch, int64_t context_tokens,
                        int warmup_steps, int timed_steps, double read_bytes_per_second,
                        const SamplingParams& sampling = GreedyParams(), bool same_token = false);

PrefillPoint BenchPrefill(CudaBackend& backend, int64_t prompt_tokens, int timed_runs);

// Experts that received tokens in the last MoE layer the backend ran over `num_tokens` tokens.
int64_t CountDistinctExperts(const CudaBackend& backend, int64_t num_tokens);

}  // namespace mkserve::cuda
