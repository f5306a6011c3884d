#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/head_dim.h"
#include "backends/cuda/core/step_metadata.h"
#include "backends/cuda/core/stream_setup.h"
#include "backends/cuda/decode/decode_path_registry.h"
#include "backends/cuda/decode/layered_forward.h"

namespace mkserve::cuda {
CudaBackend::CudaBackend(ModelConfig config, DeviceWeights weights,
                         const CudaBackendOptions& options)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      options_(options),
      device_(CurrentDeviceInfo()),
      sampler_(config_.vocab_size) {
  CheckDecodePathChoice(options_.decode_path);
  CheckPromptChunks(options_);
  if (!IsSupportedHeadDim(config_.head_dim)) {
    throw Error("CUDA backend: head_dim " + std::to_string(config_.head_dim) +
                " is not supported (16, 32, 64 or 128); use the CPU backend for this model");
  }
  stream_ = CreateStream(StreamPriority::kHighest);
  cublas_ = CreateCublas(cublas_workspace_);
  workspace_ = std::make_unique<StepWorkspace>(config_, options.max_num_tokens);
  if (options.max_prompt_chunk_tokens > 0) {  // before the KV pool takes the rest of the memory
    chunk_stream_ =
        std::make_unique<ChunkStream>(config_, weights_, device_, options_,
                                      options.max_prompt_chunk_tokens, options.max_num_tokens);
  }
  kv_pool_ = std::make_unique<KvPool>(
      options.kv_layout
          ? KvPool::Create(config_, *options.kv_layout)
          : KvPool::CreateForBudget(config_, options.gpu_memory_fraction, options.max_batch,
                                    DecodePathBytes(options_.decode_path, config_)));
  context_ = std::make_unique<DecodePathContext>(
      DecodePathContext{config_, weights_, *kv_pool_, *workspace_, device_, cublas_, options_});
  decode_paths_ = MakeDecodePaths(options_.decode_path, *context_);
}

CudaBackend::~CudaBackend() {
  ReadStartedSteps();
  decode_paths_.clear();
  chunk_stream_.reset();
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

WarmUpReport CudaBackend::WarmUp(const std::function<void(int64_t, int64_t)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  DecodeWarmUp request;
  request.max_batch = options_.max_batch;
  request.max_context_tokens = options_.warmup_context_tokens;
  request.deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double>(options_.warmup_seconds));
  request.progress = progress;
  size_t free_before = 0, free_after = 0, total = 0;
  MKSERVE_CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
  WarmUpReport report;
  try {
    for (const auto& path : decode_paths_) report.prepared += path->WarmUp(request, stream_);
    RunWarmUpSequences();
  } catch (const BackendFatalError&) {
    throw;
  } catch (const Error& e) {
    // E.g. out of memory: what is left is captured on first use, or runs eager.
    report.error = e.what();
  }
  MKSERVE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  MKSERVE_CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
  const auto end = std::chrono::steady_clock::now();
  report.seconds = std::chrono::duration<double>(end - start).count();
  report.device_bytes = static_cast<int64_t>(free_before) - static_cast<int64_t>(free_after);
  report.stopped_early = !report.error.empty() || end >= request.deadline;
  return report;
}

// CUDA loads a kernel on its first launch (lazy module loading), and the prefill GEMMs pick
// kernels by shape: without this the first live request waits for them (H200, serving with the
// megakernel: one prompt of ~100 tokens took about 60 ms more than the others after a warm-up of
// a 2-token prompt alone). A 2-token prompt and one decode step of it (the decode path's kernels),
// then a prompt of up to 512 tokens (prefill only: its decode step could need a graph of a
// context the warm-up did not prepare).
void CudaBackend::RunWarmUpSequences() {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  // A prompt of `length` tokens on blocks 0, 1, ... of every group, then one decode step of it.
  const auto run = [&](int64_t length, bool decode) {
    std::vector<int32_t> prompt(length);
    for (int64_t i = 0; i < length; ++i) prompt[i] = static_cast<int32_t>(i % config_.vocab_size);
    std::vector<int32_t> blocks((length + kBlockTokens) / kBlockTokens);  // + a decoded token
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(i);
    const std::vector<std::span<const int32_t>> tables(kv_pool_->layout().groups.size(), blocks);
    SequenceStep step;
    step.token_ids = prompt;
    step.block_tables = tables;
    step.sample = true;
    step.sampling = &greedy;
    step.prompt_token_ids = prompt;
    const std::vector<int32_t> sampled = {Step({{step}}).results.at(0).token_id};
    if (!decode) return;
    step.token_ids = sampled;
    step.start_position = length;
    step.output_token_ids = sampled;
    step.sample_index = 1;
    Step({{step}});
  };
  int64_t fewest_blocks = INT64_MAX;
  for (const KvGroup& group : kv_pool_->layout().groups) {
    fewest_blocks = std::min(fewest_blocks, group.num_blocks);
  }
  const int64_t longest =
      std::min({max_num_tokens(), fewest_blocks * kBlockTokens - 1, int64_t{512}});
  if (longest >= 2) run(2, true);
  if (longest > 2) run(longest, false);
}

void CheckPromptChunks(const CudaBackendOptions& options) {
  if (options.max_prompt_chunk_tokens < 0) {
    throw Error("max_prompt_chunk_tokens must be >= 0, got " +
                std::to_string(options.max_prompt_chunk_tokens));
  }
  // The megakernel's cooperative launch needs one CTA on every SM: beside a chunk its CTAs start
  // as the chunk's kernels release SMs (each prefill launch is bounded: attention in launches of
  // at most 80 pages), and the decode stream's priority puts them first.
}

void CudaBackend::set_decode_path(const std::string& choice) {
  CheckDecodePathChoice(choice);
  CudaBackendOptions next = options_;
  next.decode_path = choice;
  CheckPromptChunks(next);
  MKSERVE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the old paths' graphs may still run
  decode_paths_.clear();
  options_.decode_path = choice;
  decode_paths_ = MakeDecodePaths(options_.decode_path, *context_);
}

const DecodePath* CudaBackend::FindDecodePath(std::string_view name) const {
  for (const auto& path : decode_paths_) {
    if (path->name() == name) return path.get();
  }
  return nullptr;
}

StepPlan CudaBackend::Plan(const StepInputs& inputs) const {
  return BuildStepPlan(config_, kv_pool_->layout(), inputs, workspace_->max_num_tokens);
}

std::string_view CudaBackend::DecodePathFor(const StepInputs& inputs) const {
  const StepPlan plan = Plan(inputs);
  if (!plan.decode_only) return {};
  const DecodePath* path = PickDecodePath(plan);
  return path != nullptr ? path->name() : std::string_view{};
}

DecodePath* CudaBackend::PickDecodePath(const StepPlan& plan) const {
  if (!plan.decode_only) return nullptr;
  for (const auto& path : decode_paths_) {
    if (path->Accepts(plan)) return path.get();
  }
  return nullptr;
}

std::unique_ptr<PendingStep> CudaBackend::StartStep(const StepInputs& inputs, PendingStep* after) {
  std::unique_ptr<PendingStep> started;
  try {
    started = TryStart(inputs, after);
  } catch (const BackendFatalError&) {
    throw;
  } catch (const Error&) {
    // Refused on the way (the plan, the path): Step reports it, with the same words.
  }
  return started ? std::move(started) : Backend::StartStep(inputs, after);
}

std::unique_ptr<PendingStep> CudaBackend::TryStart(const StepInputs& inputs, PendingStep* after) {
  auto* before = dynamic_cast<StartedStep*>(after);
  if (after != nullptr && (before == nullptr || in_flight_[before->slot()] != before)) {
    return nullptr;  // its picks are on the host, or no longer in its slot
  }
  CheckTokensSampledBefore(inputs, after);
  // Planned with a stand-in for the tokens taken from `before`; the kernel overwrites them.
  static constexpr int32_t kStandIn[1] = {0};
  StepInputs planned = inputs;
  std::vector<int32_t> pick_rows(inputs.sequences.size(), -1);
  for (size_t s = 0; s < inputs.sequences.size(); ++s) {
    SequenceStep& step = planned.sequences[s];
    if (step.token_ids.size() != 1 || step.token_ids[0] != kTokenSampledBefore) continue;
    step.token_ids = kStandIn;
    pick_rows[s] = before->PickRowOf(step.sequence_id);
  }
  const StepPlan plan = Plan(planned);
  DecodePath* path = PickDecodePath(plan);
  // Hooks that must see every kernel (profiles) run whole steps; Accepts declines them too.
  if (path == nullptr || !path->Starts() || (options_.hooks && options_.hooks->active())) {
    return nullptr;
  }
  // Every row sampled and picked inside the kernel: the argmax, or the kernel's own sampling.
  if (plan.logit_rows.size() != inputs.sequences.size()) return nullptr;
  for (const LogitRow& row : plan.logit_rows) {
    const bool in_kernel = row.needs.sample && !row.needs.host_logits && !row.needs.host_sample &&
                           (!row.needs.gpu_sample || path->SamplesInStep()) &&
                           inputs.sequences[row.sequence_index].allowed_tokens.empty();
    if (!in_kernel) return nullptr;  // the host or the GPU sampler would read its logits
  }
  const int slot = before != nullptr ? 1 - before->slot() : 0;
  if (in_flight_[slot] != nullptr) in_flight_[slot]->Read();  // frees the slot's buffers
  HostMappedBuffer<int32_t>& argmax = started_argmax_[slot];
  if (argmax.count() < static_cast<int64_t>(plan.logit_rows.size())) {
    argmax = HostMappedBuffer<int32_t>(kLogitRowsPerChunk);
  }
  std::optional<InStepSamples> in_step;
  if (path->SamplesInStep()) in_step = sampler_.StageInStep(inputs, plan, stream_, slot);
  if (before == nullptr) pick_rows.clear();
  path->Start(plan, in_step ? &*in_step : nullptr, pick_rows, argmax.device(), slot, stream_);
  return std::make_unique<StartedStep>(inputs, plan, std::move(in_step), *path, slot, argmax,
                                       &in_flight_[slot]);
}

void CudaBackend::ReadStartedSteps() {
  for (StartedStep* step : in_flight_) {
    if (step != nullptr) step->Read();
  }
}

StepOutputs CudaBackend::Step(const StepInputs& inputs) {
  ReadStartedSteps();  // a whole step uses slot 0 and the stream's buffers
  StepOutputs outputs;
  outputs.results.resize(inputs.sequences.size());
  std::vector<size_t> decode_rows, prompt_chunks;
  for (size_t s = 0; s < inputs.sequences.size(); ++s) {
    (inputs.sequences[s].token_ids.size() == 1 ? decode_rows : prompt_chunks).push_back(s);
  }
  if (decode_rows.empty() || prompt_chunks.empty()) {
    RunPlanned(inputs, Plan(inputs), &outputs);  // the plan validates the step before GPU work
  } else {
    // Mixed: the decode rows through the decode path, the prompt chunks through the layered
    // prefill, as two sub-steps; each sequence's results are those of running it in either.
    // Both parts are planned (validated) before either runs.
    const StepInputs decode = Part(inputs, decode_rows), prompts = Part(inputs, prompt_chunks);
    const StepPlan decode_plan = Plan(decode), prompt_plan = Plan(prompts);
    RunPart(decode, decode_plan, decode_rows, &outputs);
    RunPart(prompts, prompt_plan, prompt_chunks, &outputs);
  }
  if (options_.hooks) options_.hooks->Finish(stream_);
  return outputs;
}

std::unique_ptr<PendingChunk> CudaBackend::StartPromptChunk(const SequenceStep& chunk) {
  if (!chunk_stream_) return Backend::StartPromptChunk(chunk);  // throws: none configured
  ReadStartedSteps();  // their KV writes land before the chunk's, on another stream
  return chunk_stream_->Start(chunk, *kv_pool_);
}

StepInputs CudaBackend::Part(const StepInputs& inputs, const std::vector<size_t>& sequences) {
  StepInputs part;
  for (size_t s : sequences) part.sequences.push_back(inputs.sequences[s]);
  return part;
}

void CudaBackend::RunPart(const StepInputs& part, const StepPlan& plan,
                          const std::vector<size_t>& sequences, StepOutputs* outputs) {
  StepOutputs part_outputs;
  part_outputs.results.resize(sequences.size());
  RunPlanned(part, plan, &part_outputs);
  for (size_t i = 0; i < sequences.size(); ++i) {
    outputs->results[sequences[i]] = std::move(part_outputs.results[i]);
  }
  if (!part_outputs.decode_path.empty()) outputs->decode_path = part_outputs.decode_path;
}

void CudaBackend::RunPlanned(const StepInputs& inputs, const StepPlan& plan, StepOutputs* outputs) {
  if (plan.num_tokens == 0) return;
  DecodePath* path = PickDecodePath(plan);
  if (path == nullptr) {
    if (plan.decode_only)
      outputs->decode_path = "eager";  // more rows than a path takes: its kernels
    return RunLayered(inputs, plan, outputs);
  }
  outputs->decode_path = std::string(path->name());
  std::optional<InStepSamples> in_step;
  if (path->SamplesInStep()) in_step = sampler_.StageInStep(inputs, plan, stream_);
  path->Run(plan, in_step ? &*in_step : nullptr, stream_);
  const int64_t rows = static_cast<int64_t>(plan.logit_rows.size());
  if (rows > 0) {
    sampler_.SampleRows(inputs, plan, 0, rows, workspace_->logits.data(), workspace_->sampled,
                        stream_, outputs, in_step ? &*in_step : nullptr, path->WaitsForStep());
  }
}

void CudaBackend::RunLayered(const StepInputs& inputs, const StepPlan& plan, StepOutputs* outputs) {
  const DeviceMetadata meta = UploadMetadata(plan, workspace_->metadata, stream_);
  const LayeredForward forward(*context_, stream_);
  forward.Run(plan, meta);
  const size_t num_rows = plan.logit_rows.size();
  for (size_t first = 0; first < num_rows; first += kLogitRowsPerChunk) {
    const int64_t count = std::min<int64_t>(kLogitRowsPerChunk, num_rows - first);
    forward.ComputeLogits(meta.logit_tokens, first, count);
    sampler_.SampleRows(inputs, plan, first, count, workspace_->logits.data(), workspace_->sampled,
                        stream_, outputs);
  }
}

}  // namespace mkserve::cuda
