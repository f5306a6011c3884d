// The device side of GpuSampler: the per-row parameter block, the per-token logit edits
// (penalties, bias, min_tokens masking) and the per-row result, shared by the host code that fills
// them and the kernel that reads them, plus the kernel's launcher.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mkserve::cuda {

// Top logprobs the GPU path returns per row; the server allows at most 20. Larger requests take
// the host path.
inline constexpr int32_t kGpuMaxTopLogprobs = 32;
// Probabilities are summed as integers of 2^-44 (exact, so order-free and deterministic): a row
// of up to 2^19 entries stays below 2^63.
inline constexpr int kMassFractionBits = 44;
inline constexpr int64_t kGpuSamplerMaxVocab = int64_t{1} << 19;

enum LogitEditFlags : int32_t {
  kEditRepeated = 1,    // seen in prompt or output: repetition penalty
  kEditSuppressed = 2,  // min_tokens not reached: -inf
};

// One token whose logit changes before sampling, in the CPU sampler's order: repetition penalty,
// frequency/presence (output_count > 0), the logit_bias values in request order, suppression.
struct LogitEdit {
  int32_t token_id = 0;
  int32_t flags = 0;
  int32_t output_count = 0;
  int32_t bias_begin = 0;  // range into the bias values
  int32_t bias_end = 0;
};

struct SampleRowParams {
  int64_t logits_row = 0;    // row of the logits buffer
  double uniform = 0.0;      // SampleUniform(seed, sample_index), computed on the host
  float temperature = 1.0f;  // <= 0: greedy
  int32_t top_k = 0;         // 0: off (already 0 when >= vocab)
  float top_p = 1.0f;        // >= 1: off
  float min_p = 0.0f;        // <= 0: off
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int32_t num_logprobs = -1;  // -1: none; else top entries (<= kGpuMaxTopLogprobs)
  int32_t edit_begin = 0;     // range into the edits, sorted by token id
  int32_t edit_end = 0;
  int64_t allowed_begin = -1;  // word offset of the allowed-token bitmask; -1: every token
  int32_t allowed_words = 0;   // ids past these words are not allowed
};

struct SampleRowOutput {
  int32_t token_id = -1;
  float chosen_logprob = 0.0f;
  int32_t num_top = 0;
  int32_t top_ids[kGpuMaxTopLogprobs];
  float top_logprobs[kGpuMaxTopLogprobs];
};

// Top entries (id, logit) of a row, or of one team member's slice of it before they are merged.
struct TopEntries {
  int32_t num;
  int32_t ids[kGpuMaxTopLogprobs];
  float logits[kGpuMaxTopLogprobs];
};

// The device arrays of staged requests (GpuSampler::Stage), in request order, as the sampling
// kernel or the decode megakernel's kSample reads them; valid until the sampler stages again.
struct StagedSamples {
  int64_t count = 0;
  const SampleRowParams* rows = nullptr;
  const LogitEdit* edits = nullptr;
  const float* bias_values = nullptr;
  float* originals = nullptr;  // [edits]: each edited token's logit before its edit
  const uint32_t* allowed_masks = nullptr;
  SampleRowOutput* outputs = nullptr;
};

// One cluster of CTAs per staged request. The logits rows the requests name are changed in place
// (edits applied, tokens outside the allowed masks set to -inf); `staged.originals[e]` receives
// edit e's logit before the change.
void LaunchSampleRows(float* logits, int64_t vocab, const StagedSamples& staged,
                      cudaStream_t stream);

}  // namespace mkserve::cuda
