// Backend: the seam between the engine and the hardware. The engine schedules, manages KV blocks
// and streams tokens; a backend runs forward passes over the paged KV cache and samples. The
// engine never knows whether the CPU reference, the layered CUDA path or the megakernel runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/kv_layout.h"
#include "engine/sampling_params.h"
#include "model/model_config.h"

namespace mkserve {

// One sequence's share of a step: a prefill chunk or one decode token.
struct SequenceStep {
  int64_t sequence_id = 0;
  std::span<const int32_t> token_ids;  // tokens to run, at positions start_position...
  int64_t start_position = 0;          // tokens of this sequence already in the KV cache
  // Per KV group (KvLayout order): physical block of each logical block; -1 = released
  // (sliding groups drop blocks before the window). Covers start_position + token_ids.size().
  std::vector<std::span<const int32_t>> block_tables;

  // Sampling: `sample` is set on the last prefill chunk and on decode tokens; the other fields
  // are set on every step (the engine always fills them).
  bool sample = false;
  const SamplingParams* sampling = nullptr;
  std::span<const int32_t> prompt_token_ids;  // whole prompt (repetition penalty)
  std::span<const int32_t> output_token_ids;  // generated so far (penalties)
  // Index of the token being sampled among this request's outputs: with the seed it selects the
  // random stream, so results do not depend on the batch slot.
  int64_t sample_index = 0;
  // Constrained decoding (response_format, forced tool calls): the tokens that may be sampled, a
  // bitmask (bit id % 32 of word id / 32; ids past its end are not allowed). Empty: any token.
  // Samplers give the others -inf after penalties and bias; logprobs stay unmasked.
  std::span<const uint32_t> allowed_tokens;
  // The engine writes allowed_tokens while the forward pass runs: a sampler calls
  // WaitForAllowedTokens() before reading them (it rethrows the mask computation's error).
  std::shared_future<void> allowed_tokens_ready;
  void WaitForAllowedTokens() const {
    if (allowed_tokens_ready.valid()) allowed_tokens_ready.get();
  }

  // Prompt logprobs (echo): the token that follows each of token_ids (-1 where unknown, e.g.
  // after the last prompt token). Empty when not requested.
  std::span<const int32_t> next_token_ids;

  // Tests and oracles only: return the full logits of every position in token_ids.
  bool return_logits = false;
};

struct StepInputs {
  std::vector<SequenceStep> sequences;
};

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

// Logprobs are the model's own distribution (log-softmax of the scaled logits), before penalties,
// bias and temperature, as vLLM reports them by default.
struct PositionLogprobs {
  TokenLogprob chosen;            // the sampled (or, for prompts, the actual next) token
  std::vector<TokenLogprob> top;  // the k most likely, best first
};

struct SequenceResult {
  int32_t token_id = -1;                          // sampled token when SequenceStep::sample
  PositionLogprobs logprobs;                      // filled when sampling->num_logprobs >= 0
  std::vector<PositionLogprobs> prompt_logprobs;  // one per next_token_ids entry that is >= 0
  std::vector<std::vector<float>> logits;         // [token_ids.size()][vocab] when return_logits
};

struct StepOutputs {
  std::vector<SequenceResult> results;  // same order as StepInputs::sequences
  // The decode path that ran this step's decode rows ("graph", "megakernel", ...), for /metrics;
  // empty when the step had none or the backend has no decode paths.
  std::string decode_path;
};

// The decode token of a row that the step given to Backend::StartStep as `after` samples for
// the same sequence: the engine starts a step before it has read the previous step's tokens.
inline constexpr int32_t kTokenSampledBefore = -1;

// A step Backend::StartStep started. Wait returns its outputs once the step has finished (the
// same outputs on every call), or throws what Step would have thrown (mkserve::Error, with
// BackendFatalError when the backend cannot run another step). Destroying a step that has not
// finished waits for it: its KV writes land before its blocks are reused.
class PendingStep {
 public:
  explicit PendingStep(const StepInputs& inputs);
  virtual ~PendingStep() = default;
  virtual const StepOutputs& Wait() = 0;
  // The step's row of `sequence_id`, or -1.
  int64_t RowOf(int64_t sequence_id) const;

 private:
  std::vector<int64_t> sequence_ids_;  // StepInputs order
};

// A prompt chunk running beside the steps (Backend::StartPromptChunk). Until Wait says it is
// done, the chunk may still write the KV blocks of its sequence.
class PendingChunk {
 public:
  // Destroying a chunk that has not finished waits for it: its blocks may be reused afterwards.
  virtual ~PendingChunk() = default;
  // Whether the chunk has finished, waiting up to `timeout` for it. Throws mkserve::Error when it
  // failed (BackendFatalError when the backend cannot run another step).
  virtual bool Wait(std::chrono::microseconds timeout) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual const ModelConfig& config() const = 0;
  // The KV pools this backend allocated; the engine's block manager hands out these blocks.
  virtual const KvLayout& kv_layout() const = 0;
  // Runs one step. Throws mkserve::Error on a failure the engine should report to the requests.
  virtual StepOutputs Step(const StepInputs& inputs) = 0;

  // Starts one step; its failures, bad inputs included, come from PendingStep::Wait. A row whose
  // token_ids is the single token kTokenSampledBefore decodes the token that `after` (a step this
  // backend started and has not yet destroyed) samples for its sequence; its output_token_ids
  // lack that token, so the row's sampling must not depend on them (no penalties, min_tokens
  // met: CheckTokensSampledBefore). The spans of `inputs` need to live only during the call. The
  // default waits for `after`, resolves those tokens and runs Step before it returns.
  virtual std::unique_ptr<PendingStep> StartStep(const StepInputs& inputs,
                                                 PendingStep* after = nullptr);
  // Whether StartStep returns while the step still runs, so that the caller's work between two
  // steps overlaps the device's (the engine's decode lookahead, docs/request-flow.md).
  virtual bool runs_ahead() const { return false; }

  // Prompt chunks beside the steps: a backend that can compute a prompt chunk while the next
  // Steps run (the CUDA backend: on a second stream) takes chunks of up to this many tokens; 0
  // (the default) means it cannot, and prompts run inside steps only.
  virtual int64_t max_prompt_chunk_tokens() const { return 0; }
  // Starts computing `chunk` (one sequence's prompt tokens: no sampling, no logits, no prompt
  // logprobs) and returns at once; the spans in `chunk` are valid only during the call. One chunk
  // at a time: the previous one has finished (Wait said so) before the next starts. Throws
  // mkserve::Error for a chunk it cannot run.
  virtual std::unique_ptr<PendingChunk> StartPromptChunk(const SequenceStep& chunk) {
    (void)chunk;
    throw Error(name() + " cannot run prompt chunks beside steps");
  }
};

// What every StartStep refuses in a row that decodes kTokenSampledBefore: more than that one
// token, no `after` step or none of the row's sequence in it, sampling that reads the output
// tokens (penalties, min_tokens not yet met). Throws mkserve::Error naming the sequence.
void CheckTokensSampledBefore(const StepInputs& inputs, const PendingStep* after);

// `inputs` with each kTokenSampledBefore replaced by the token `after` sampled (waiting for it);
// `tokens` backs the replaced spans. Throws what after->Wait() throws.
StepInputs ResolveTokensSampledBefore(const StepInputs& inputs, PendingStep* after,
                                      std::vector<int32_t>& tokens);

// What every StartPromptChunk refuses: a chunk that samples or asks for logits or logprobs (it
// computes KV only), or one longer than `max_tokens`. Throws mkserve::Error naming which.
void CheckPromptChunk(const SequenceStep& chunk, int64_t max_tokens);

}  // namespace mkserve
