// The whole decode step through the megakernel against the layered CUDA path, same weights, same
// KV pool (filled with random values, so no prefill is needed), same rows. Top-k routing is
// discontinuous and the two paths round differently (tiling, summation order), so a router
// near-tie may flip between them and the flip spreads through the later layers. The test
// therefore (1) checks that every routing decision where the megakernel's free choice differs
// from the layered path's is a near-tie (backend_test_util.h's bound, or one that the
// megakernel's measured router-logit error explains), and (2) forces the layered path onto the
// megakernel's routing, after which every row's logits must agree (cosine >= 0.999) and its
// greedy token too, up to near-ties. Random weights at North width, batches 1, 8, 32 and 64;
// contexts are ragged and cross the 4096-token sliding window; and 256 greedy steps in a row at
// batch 8.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "backends/cuda/backend_test_util.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/gpu_test_util.h"
#include "backends/cuda/sampling/gpu_sampler.h"
#include "backends/cuda/sampling/step_sampler.h"
#include "backends/cuda/sampling_cases.h"
#include "backends/cuda/tools/decode_bench.h"
#include "backends/cuda/tools/router_override.h"
#include "backends/cuda/tools/tool_hooks.h"
#include "common/error.h"
#include "engine/backend_error.h"
#include "megakernel/device/megakernel_decoder.h"
#include "megakernel/schedule/timeline.h"
#include "model/presets.h"

namespace mkserve::megakernel::testing {
namespace {

using cuda::testing::CompareRouting;
using cuda::testing::Cosine;
using cuda::testing::ExpectSameGreedy;
using cuda::testing::MakeStep;
using cuda::testing::ReferenceRouting;
using cuda::testing::RoutingComparison;
using cuda::testing::SimpleBlocks;

constexpr double kMinCosine = 0.999;

int64_t ContextOf(int64_t row, int64_t batch) {
  if (batch == 1) return 4500;  // past the window: sliding layers read a window, full ones all
  if (row == 0) return 4100;
  if (row == 1) return 5000;
  return 1 + (row * 397) % 1500;
}

// Standard deviation of the two paths' logit difference over the reference's 256 largest logits,
// where a top-2 decision is made: the bf16 rounding noise of 49 random layers (cosine 0.9997)
// grows with a logit's size, so the vocabulary-wide RMS understates it there (a flip at 4.0
// vocabulary-wide deviations was seen on the H200).
double TopLogitNoise(const std::vector<float>& got, const std::vector<float>& want) {
  constexpr size_t kTop = 256;
  std::vector<size_t> order(want.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const size_t top = std::min(kTop, order.size());
  std::partial_sort(order.begin(), order.begin() + top, order.end(),
                    [&](size_t a, size_t b) { return want[a] > want[b]; });
  double squares = 0;
  for (size_t i = 0; i < top; ++i) {
    const double diff = static_cast<double>(got[order[i]]) - want[order[i]];
    squares += diff * diff;
  }
  return top > 0 ? std::sqrt(squares / static_cast<double>(top)) : 0.0;
}

// One bf16 unit in the last place at |v|: 2^-7 of the power of two at or below it.
double Bf16Ulp(double v) {
  const double magnitude = std::fabs(v);
  return magnitude > 0 ? std::ldexp(1.0, std::ilogb(magnitude) - 7) : 0.0;
}

// A greedy flip is a near-tie when the reference gap is within 4 standard deviations of the
// noise on a gap, within one bf16 ulp of the reference's top logit (the two logits are "within
// bf16 rounding" of each other: rounded to bf16 they would be equal or neighbours), or within
// the shared 0.5 % of the largest logit. A gap is the difference of two noisy logits, so its
// deviation is sqrt(2) times one logit's. The split-K sums are added by atomics in arrival
// order, so timing alone moves logits by this noise: flips at 1.1-1.2x a bound of 4
// single-logit deviations, and at 1.14x 0.5 % of the largest logit (a gap of 0.0064 under a top
// logit near 1.1, where one ulp is 0.0078), came from changes that only moved timing.
double TieFraction(const std::vector<float>& got, const std::vector<float>& want) {
  double max_abs = 0, top = -INFINITY;
  for (float v : want) {
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(v)));
    top = std::max(top, static_cast<double>(v));
  }
  if (!(max_abs > 0)) return 0.005;
  const double gap_noise = std::sqrt(2.0) * TopLogitNoise(got, want);
  return std::max({0.005, 4.0 * gap_noise / max_abs, Bf16Ulp(top) / max_abs});
}

class MegakernelVsLayered : public ::testing::Test {
 protected:
  void Load(int64_t layers, bool timeline = false,
            const SchedulePolicy& policy = SchedulePolicy::Default()) {
    cuda::testing::RequireGpu();
    ModelConfig config = NmcPreset(layers);
    cuda::DeviceWeights weights = cuda::DeviceWeights::Random(config, /*seed=*/2026);
    cuda::CudaBackendOptions options;
    options.max_batch = 64;
    options.max_num_tokens = 64;
    options.gpu_memory_fraction = 0.85;
    options.hooks = hooks_;
    backend_ = std::make_unique<cuda::CudaBackend>(std::move(config), std::move(weights), options);
    backend_->kv_pool().FillRandom(/*seed=*/7, /*stddev=*/1.0f);
    MegakernelDecoderOptions mk_options;
    mk_options.record_timeline = timeline;
    mk_options.record_routing = true;
    mk_options.policy = policy;
    panels_ = std::make_unique<ProjectionPanels>(backend_->config(), backend_->weights());
    decoder_ = std::make_unique<MegakernelDecoder>(backend_->config(), backend_->weights(),
                                                   *panels_, backend_->kv_pool(), mk_options);
    argmax_ = cuda::HostMappedBuffer<int32_t>(kMaxMegakernelBatch);
  }

  // One decode step of `batch` rows through both paths.
  void CompareStep(int64_t batch) {
    const ModelConfig& config = backend_->config();
    SimpleBlocks blocks(backend_->kv_layout());
    std::vector<std::vector<int32_t>> tokens;
    std::vector<std::vector<std::vector<int32_t>>> tables;
    const SamplingParams greedy = cuda::GreedyParams();
    StepInputs inputs;
    for (int64_t row = 0; row < batch; ++row) {
      tokens.push_back({static_cast<int32_t>((row * 7919 + 11) % (config.vocab_size - 16) + 8)});
      tables.push_back(blocks.Allocate(ContextOf(row, batch) + 1));
    }
    for (int64_t row = 0; row < batch; ++row) {
      inputs.sequences.push_back(MakeStep(row, tokens[row], ContextOf(row, batch), tables[row],
                                          &greedy, /*return_logits=*/true));
    }
    const int64_t moe_layers = config.num_moe_layers(), k = config.num_experts_per_token;
    std::unique_ptr<cuda::RoutingOverride> traced;  // a model without MoE layers routes nothing
    if (moe_layers > 0)
      traced = std::make_unique<cuda::RoutingOverride>(config, batch, std::vector<int32_t>{});
    hooks_->set_routing_override(traced.get());
    const StepOutputs layered_free = backend_->Step(inputs);
    PoisonNewTokenSlots(tables, batch);
    const cuda::StepPlan plan =
        cuda::BuildStepPlan(config, backend_->kv_layout(), inputs, backend_->max_num_tokens());
    cuda::DeviceBuffer<float> logits = cuda::testing::NanFloats(batch * config.vocab_size);
    std::fill_n(argmax_.host(), argmax_.count(), -1);  // a row the step does not write stays -1
    decoder_->Run(plan, logits.data(), StepSampling{argmax_.device()}, backend_->stream());
    const std::vector<float> ours = cuda::testing::ToHost(logits);
    ExpectArgmaxOf(ours, batch);
    const std::vector<int32_t> our_routing = decoder_->LastRouting();
    ASSERT_EQ(our_routing.size(), static_cast<size_t>(moe_layers * batch * k));
    int64_t decisions_differing = 0;
    if (moe_layers > 0) {
      ReferenceRouting ref;
      ref.num_moe_layers = moe_layers;
      ref.num_rows = batch;
      ref.top_k = k;
      ref.num_experts = config.num_experts;
      ref.expert_ids = traced->TracedIds();
      ref.router_logits = traced->TracedLogits();
      // Our own router logits: a flip the reference's gap alone does not call a near-tie may
      // still be one that our measured logit error explains.
      const std::vector<float> our_logits = decoder_->LastRouterLogits();
      ASSERT_EQ(our_logits.size(), ref.router_logits.size());
      const RoutingComparison c =
          CompareRouting(ref, our_routing, our_logits, batch, /*roots_only=*/true);
      for (const std::string& problem : c.problems) ADD_FAILURE() << "free routing: " << problem;
      decisions_differing = c.num_different;
    }
    std::unique_ptr<cuda::RoutingOverride> forced;
    if (moe_layers > 0)
      forced = std::make_unique<cuda::RoutingOverride>(config, batch, our_routing);
    hooks_->set_routing_override(forced.get());
    const StepOutputs layered = backend_->Step(inputs);
    hooks_->set_routing_override(nullptr);
    double lowest_free = 1.0;
    double lowest = 1.0;
    for (int64_t row = 0; row < batch; ++row) {
      const std::vector<float>& want = layered.results[row].logits.at(0);
      const std::vector<float> got(ours.begin() + row * config.vocab_size,
                                   ours.begin() + (row + 1) * config.vocab_size);
      const double free_cosine = Cosine(got, layered_free.results[row].logits.at(0));
      if (!(free_cosine >= lowest_free)) lowest_free = free_cosine;
      const std::string where = "batch " + std::to_string(batch) + " row " + std::to_string(row) +
                                " (context " + std::to_string(ContextOf(row, batch)) + ")";
      const double cosine = Cosine(got, want);
      if (!(cosine >= lowest)) lowest = cosine;  // NaN shows
      EXPECT_GE(cosine, kMinCosine) << where;
      int32_t best = 0;
      for (int32_t v = 1; v < static_cast<int32_t>(got.size()); ++v) {
        if (got[v] > got[best]) best = v;
      }
      ExpectSameGreedy(best, layered.results[row].token_id, want, where, TieFraction(got, want));
    }
    std::printf(
        "%lld layers, batch %lld: lowest logits cosine %.6f (free routing: %.6f, %lld of %lld "
        "decisions differ), step %.3f ms\n",
        static_cast<long long>(config.num_layers), static_cast<long long>(batch), lowest,
        lowest_free, static_cast<long long>(decisions_differing),
        static_cast<long long>(moe_layers * batch), decoder_->last_step_ms());
  }

  // Every layer's KV slot of each row's new token set to NaN (the layered step before wrote it):
  // the megakernel's QKV tiles must write it before any attention task reads it, so a read that
  // runs ahead of its wait (e.g. KV loads issued before the task's wait) makes the logits NaN.
  void PoisonNewTokenSlots(const std::vector<std::vector<std::vector<int32_t>>>& tables,
                           int64_t batch) {
    const ModelConfig& config = backend_->config();
    const int64_t kv_width = config.kv_width();
    const cuda::DeviceBuffer<cuda::testing::bf16> nan = cuda::testing::NanBf16(2 * kv_width);
    for (int64_t layer = 0; layer < config.num_layers; ++layer) {
      const int32_t group = backend_->kv_pool().group_of_layer(layer);
      for (int64_t row = 0; row < batch; ++row) {
        const int64_t position = ContextOf(row, batch);
        const int64_t block = tables[row][group][position / kBlockTokens];
        cuda::testing::bf16* slot = backend_->kv_pool().layer_cache(layer) +
                                    (block * kBlockTokens + position % kBlockTokens) * 2 * kv_width;
        MKSERVE_CUDA_CHECK(
            cudaMemcpy(slot, nan.data(), 2 * kv_width * sizeof(*slot), cudaMemcpyDeviceToDevice));
      }
    }
  }

  // The step's argmax of each row against the logits it wrote (lowest id on ties).
  void ExpectArgmaxOf(const std::vector<float>& logits, int64_t batch) {
    MKSERVE_CUDA_CHECK(cudaStreamSynchronize(backend_->stream()));  // the kernel wrote argmax_
    const int32_t* argmax = argmax_.host();
    const int64_t vocab = backend_->config().vocab_size;
    for (int64_t row = 0; row < batch; ++row) {
      const float* begin = logits.data() + row * vocab;
      EXPECT_EQ(argmax[row], std::max_element(begin, begin + vocab) - begin) << "row " << row;
    }
  }

  std::shared_ptr<cuda::ToolHooks> hooks_ = std::make_shared<cuda::ToolHooks>();
  cuda::HostMappedBuffer<int32_t> argmax_;  // [kMaxMegakernelBatch], made by Load
  std::unique_ptr<cuda::CudaBackend> backend_;
  std::unique_ptr<ProjectionPanels> panels_;
  std::unique_ptr<MegakernelDecoder> decoder_;
};

// Layer 0 alone: dense SwiGLU, full attention with RoPE, then the LM head.
TEST_F(MegakernelVsLayered, OneDenseLayer) {
  Load(1);
  for (int64_t batch : {1, 8, 32, 64}) CompareStep(batch);
}

// Every task of the last step has a timeline record, and the trace export takes them.
void ExpectFullTimeline(const MegakernelDecoder& decoder) {
  const Schedule& schedule = *decoder.last_schedule();
  const std::vector<TaskTimestamp> records = decoder.LastTimeline();
  ASSERT_EQ(records.size(), static_cast<size_t>(schedule.num_sms * schedule.max_tasks_per_sm()));
  for (size_t sm = 0; sm < schedule.sm_tasks.size(); ++sm) {
    for (size_t i = 0; i < schedule.sm_tasks[sm].size(); ++i) {
      const TaskTimestamp& r = records[sm * schedule.max_tasks_per_sm() + i];
      ASSERT_GT(r.start_ns, 0u) << "sm " << sm << " task " << i;
      ASSERT_GE(r.ready_ns, r.start_ns) << "sm " << sm << " task " << i;
      ASSERT_GE(r.end_ns, r.ready_ns) << "sm " << sm << " task " << i;
    }
  }
  EXPECT_NE(TimelineToChromeTrace(schedule, records).find("traceEvents"), std::string::npos);
}

// Layers 0-4: the dense layer, three sliding MoE layers, a full NoPE MoE layer; timeline on.
TEST_F(MegakernelVsLayered, FiveLayers) {
  Load(5, /*timeline=*/true);
  for (int64_t batch : {1, 8, 32, 64}) {
    CompareStep(batch);
    ExpectFullTimeline(*decoder_);
  }
}

// The same with each MoE layer's top-k run inside its finalize task (tile shape
// topk_in_finalize): one cross-SM hop less per layer, the same results.
TEST_F(MegakernelVsLayered, FiveLayersWithTopKInFinalize) {
  SchedulePolicy policy = SchedulePolicy::Default();
  policy.tiles = {{"topk_in_finalize", 1}, {"pick_items", 0}};  // one row would go by pick
  Load(5, /*timeline=*/false, policy);
  for (int64_t batch : {1, 8, 32, 64}) {
    CompareStep(batch);
    const Schedule& ran = *decoder_->last_schedule();  // the fused schedule, not the default
    int finalizes = 0;
    for (const auto& list : ran.sm_tasks) {
      for (const TaskDescriptor& task : list) {
        EXPECT_NE(task.opcode, kTopK);
        if (task.opcode == kMoeFinalize) finalizes += (task.flags & kFlagWithTopK) != 0 ? 1 : 0;
      }
    }
    EXPECT_EQ(finalizes, backend_->config().num_moe_layers());
  }
}

// Sampling inside the step: the rows StepSampler stages (temperature, top-k/p, min-p, seeds,
// logprobs; no edits, so the kernel leaves their logits as the LM head wrote them) come back as
// the GpuSampler samples the same logits, at batch 1 (one team over every SM) and 8; rows with
// an allowed-token mask stay for the sampler after the step, and every row's argmax is written.
TEST_F(MegakernelVsLayered, SamplesInsideTheStepAsTheGpuSampler) {
  Load(5);
  ASSERT_TRUE(decoder_->samples_in_step());
  const ModelConfig& config = backend_->config();
  const int64_t vocab = config.vocab_size;
  SimpleBlocks blocks(backend_->kv_layout());
  std::vector<SamplingParams> params(8);
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].temperature = i == 3 ? 0.0f : 0.6f + 0.2f * static_cast<float>(i);
    params[i].top_k = i % 3 == 1 ? 40 : 0;
    params[i].top_p = i % 2 ? 0.9f : 1.0f;
    params[i].min_p = i == 5 ? 0.05f : 0.0f;
    params[i].num_logprobs = i % 4 == 0 ? 5 : -1;
    params[i].seed = 100 + static_cast<int64_t>(i);
  }
  std::vector<uint32_t> allowed((vocab + 31) / 32, 0x0F0F0F0Fu);
  for (int64_t batch : {1, 8}) {
    std::vector<std::vector<int32_t>> tokens;
    std::vector<std::vector<std::vector<int32_t>>> tables;
    StepInputs inputs;
    for (int64_t row = 0; row < batch; ++row) {
      tokens.push_back({static_cast<int32_t>((row * 131 + 7) % vocab)});
      tables.push_back(blocks.Allocate(ContextOf(row, batch) + 1));
    }
    for (int64_t row = 0; row < batch; ++row) {
      inputs.sequences.push_back(MakeStep(row, tokens[row], ContextOf(row, batch), tables[row],
                                          &params[row], /*return_logits=*/false));
      inputs.sequences.back().sample_index = 3 + row;
    }
    if (batch > 1) inputs.sequences[batch - 1].allowed_tokens = allowed;  // sampled after
    const cuda::StepPlan plan =
        cuda::BuildStepPlan(config, backend_->kv_layout(), inputs, backend_->max_num_tokens());
    cuda::StepSampler sampler(vocab);
    const cuda::InStepSamples in_step = sampler.StageInStep(inputs, plan, backend_->stream());
    int64_t staged = 0;  // plain greedy rows take the kernel's argmax; the masked row waits
    for (const SequenceStep& step : inputs.sequences) {
      staged += !cuda::IsPlainGreedy(step.sampling) && step.allowed_tokens.empty() ? 1 : 0;
    }
    EXPECT_EQ(in_step.staged.count, staged);
    cuda::DeviceBuffer<float> logits = cuda::testing::NanFloats(batch * vocab);
    decoder_->Run(plan, logits.data(), StepSampling{argmax_.device(), &in_step},
                  backend_->stream());
    const std::vector<float> ours = cuda::testing::ToHost(logits);  // before the masked row's
    StepOutputs got;
    got.results.resize(batch);
    sampler.SampleRows(inputs, plan, 0, batch, logits.data(), argmax_, backend_->stream(), &got,
                       &in_step);
    // The oracle: the GpuSampler's own kernel on a copy of the same logits.
    cuda::DeviceBuffer<float> copy = cuda::testing::ToDevice(ours);
    cuda::GpuSampler oracle(vocab);
    std::vector<cuda::GpuSampleRequest> requests;
    for (int64_t row = 0; row < batch; ++row) requests.push_back({row, &inputs.sequences[row]});
    const std::vector<SequenceResult> want =
        oracle.Sample(copy.data(), batch, requests, backend_->stream());
    for (int64_t row = 0; row < batch; ++row) {
      cuda::testing::ExpectSame(got.results[row], want[row],
                                "batch " + std::to_string(batch) + " row " + std::to_string(row));
    }
  }
}

// Expert items by pick (tile shape pick_items): no finalize, the claims read the top-k's ids;
// at batch 8 and up rows share experts, whose weights then stream once per pick. Same results.
TEST_F(MegakernelVsLayered, FiveLayersWithExpertItemsByPick) {
  SchedulePolicy policy = SchedulePolicy::Default();
  policy.tiles = {{"pick_items", 1}};
  Load(5, /*timeline=*/true, policy);
  for (int64_t batch : {1, 2, 8, 64}) {
    CompareStep(batch);
    ExpectFullTimeline(*decoder_);
    int finalizes = 0, picks = 0;
    for (const auto& list : decoder_->last_schedule()->sm_tasks) {
      for (const TaskDescriptor& task : list) {
        finalizes += task.opcode == kMoeFinalize ? 1 : 0;
        // By pick a top-k task picks, or at batch 1 the claims do (kFlagTopKInClaims).
        picks += (task.opcode == kTopK && (task.flags & kFlagPickItems) != 0) ||
                         (task.flags & kFlagTopKInClaims) != 0
                     ? 1
                     : 0;
      }
    }
    EXPECT_EQ(finalizes, 0);
    EXPECT_GT(picks, 0);
  }
}

// Early gate/up claims of one item on the SMs without QKV tiles (tile shape early_expert_items):
// the bounded claims and the unbounded ones share the queue, every item runs once (the full
// timeline), and the step computes what the layered path does.
TEST_F(MegakernelVsLayered, FiveLayersWithEarlyExpertClaims) {
  SchedulePolicy policy = SchedulePolicy::Default();
  policy.tiles = {{"early_expert_items", 1}};
  Load(5, /*timeline=*/true, policy);
  for (int64_t batch : {1, 2, 8, 64}) {
    CompareStep(batch);
    ExpectFullTimeline(*decoder_);
    int bounded = 0;
    for (const auto& list : decoder_->last_schedule()->sm_tasks) {
      for (const TaskDescriptor& task : list) bounded += task.arg[kArgMaxItems] != 0 ? 1 : 0;
    }
    EXPECT_GT(bounded, 0);
  }
}

// Static LM head tiles that copy their first weight rounds before their wait
// (prime_lm_head_max_batch): the step computes what the layered path does, at the batches that
// prime (up to 8) and one that does not.
TEST_F(MegakernelVsLayered, FiveLayersWithPrimedLmHeadTiles) {
  SchedulePolicy policy = SchedulePolicy::Default();
  policy.tiles = {{"prime_lm_head_max_batch", 8}};
  Load(5, /*timeline=*/true, policy);
  for (int64_t batch : {1, 3, 8, 16}) {
    CompareStep(batch);
    ExpectFullTimeline(*decoder_);
    int primed = 0;
    for (const auto& list : decoder_->last_schedule()->sm_tasks) {
      for (const TaskDescriptor& task : list) {
        primed += task.opcode == kLmHead && (task.flags & kFlagPrimeWeights) != 0 ? 1 : 0;
      }
    }
    EXPECT_EQ(primed > 0, batch <= 8) << "batch " << batch;
  }
}

// The whole North Mini Code geometry (49 layers).
TEST_F(MegakernelVsLayered, FullDepth) {
  Load(49);
  for (int64_t batch : {1, 8, 32, 64}) CompareStep(batch);
}

// 256 greedy steps at batch 8 through all 49 layers. Each step the megakernel runs, the layered
// path runs forced onto its routing, and every row's logits must agree (cosine >= 0.999) with the
// same greedy token up to near-ties; the layered path's token is both paths' next input (the KV
// history is shared: both write each position's K/V, the layered path last). Three rows cross the
// 4096-token sliding window during the run.
TEST_F(MegakernelVsLayered, GreedyTokensOver256Steps) {
  Load(49);
  constexpr int64_t kSteps = 256;
  const std::vector<int64_t> contexts = {3950, 4000, 4090, 4100, 5000, 100, 1000, 2000};
  const int64_t batch = static_cast<int64_t>(contexts.size());
  const ModelConfig& config = backend_->config();
  SimpleBlocks blocks(backend_->kv_layout());
  std::vector<std::vector<std::vector<int32_t>>> tables;
  std::vector<int32_t> tokens;
  for (int64_t row = 0; row < batch; ++row) {
    tables.push_back(blocks.Allocate(contexts[row] + kSteps + 1));
    tokens.push_back(static_cast<int32_t>((row * 7919 + 11) % (config.vocab_size - 16) + 8));
  }
  const SamplingParams greedy = cuda::GreedyParams();
  cuda::DeviceBuffer<float> logits = cuda::testing::NanFloats(batch * config.vocab_size);
  double lowest = 1.0;
  int64_t near_tie_flips = 0;
  std::vector<std::vector<int32_t>> step_tokens(batch);  // the steps' spans point here
  for (int64_t step = 0; step < kSteps; ++step) {
    StepInputs inputs;
    for (int64_t row = 0; row < batch; ++row) {
      step_tokens[row] = {tokens[row]};
      inputs.sequences.push_back(MakeStep(row, step_tokens[row], contexts[row] + step, tables[row],
                                          &greedy, /*return_logits=*/true));
    }
    const cuda::StepPlan plan =
        cuda::BuildStepPlan(config, backend_->kv_layout(), inputs, backend_->max_num_tokens());
    // NaN every step: a logit the step failed to write must not keep the last step's value.
    MKSERVE_CUDA_CHECK(cudaMemsetAsync(logits.data(), 0xFF, logits.bytes(), backend_->stream()));
    std::fill_n(argmax_.host(), argmax_.count(), -1);  // the last step's kernel has finished
    decoder_->Run(plan, logits.data(), StepSampling{argmax_.device()}, backend_->stream());
    const std::vector<float> ours = cuda::testing::ToHost(logits);
    ExpectArgmaxOf(ours, batch);
    cuda::RoutingOverride forced(config, batch, decoder_->LastRouting());
    hooks_->set_routing_override(&forced);
    const StepOutputs layered = backend_->Step(inputs);
    hooks_->set_routing_override(nullptr);
    for (int64_t row = 0; row < batch; ++row) {
      const std::vector<float>& want = layered.results[row].logits.at(0);
      const std::vector<float> got(ours.begin() + row * config.vocab_size,
                                   ours.begin() + (row + 1) * config.vocab_size);
      const std::string where = "step " + std::to_string(step) + " row " + std::to_string(row) +
                                " (reference top logit " +
                                std::to_string(*std::max_element(want.begin(), want.end())) + ")";
      const double cosine = Cosine(got, want);
      if (!(cosine >= lowest)) lowest = cosine;
      ASSERT_GE(cosine, kMinCosine) << where;
      const int32_t best =
          static_cast<int32_t>(std::max_element(got.begin(), got.end()) - got.begin());
      ExpectSameGreedy(best, layered.results[row].token_id, want, where, TieFraction(got, want));
      if (::testing::Test::HasFailure()) return;
      if (best != layered.results[row].token_id) {
        ++near_tie_flips;
        const double gap = want[layered.results[row].token_id] - want[best];
        std::printf("%s: near-tie flip, gap %.3g = %.2f gap deviations\n", where.c_str(), gap,
                    gap / (std::sqrt(2.0) * TopLogitNoise(got, want)));
      }
      tokens[row] = layered.results[row].token_id;
    }
  }
  std::printf(
      "%lld greedy steps at batch %lld: lowest logits cosine %.6f, %lld near-tie flips of %lld "
      "tokens\n",
      static_cast<long long>(kSteps), static_cast<long long>(batch), lowest,
      static_cast<long long>(near_tie_flips), static_cast<long long>(kSteps * batch));
}

// A step the watchdog abandons keeps its counters (its zeroing after it is skipped, so the report
// reads them); the next step zeroes them first and decodes as the layered path does. Without
// that, the half-counted waits of the schedule both steps run would pass early.
TEST_F(MegakernelVsLayered, AnAbandonedStepLeavesTheNextOneRight) {
  Load(5);
  decoder_ = std::make_unique<MegakernelDecoder>(
      backend_->config(), backend_->weights(), *panels_, backend_->kv_pool(),
      MegakernelDecoderOptions{.watchdog = std::chrono::milliseconds(300), .record_routing = true});
  for (int64_t batch : {1, 8}) {
    const auto rows = cuda::MakeDecodeBatch(*backend_, batch, ContextOf(0, batch));
    const cuda::StepPlan plan = cuda::BuildStepPlan(backend_->config(), backend_->kv_layout(),
                                                    rows->inputs, backend_->max_num_tokens());
    cuda::DeviceBuffer<float> logits(batch * backend_->config().vocab_size);
    EXPECT_THROW(decoder_->Run(plan, logits.data(), StepSampling{argmax_.device()},
                               backend_->stream(), StepFault::kStuckWait),
                 BackendFatalError);
    CompareStep(batch);
  }
}

// A decoder is refused a max_batch above kMaxMegakernelBatch, and a step with more rows than its
// max_batch is refused with an error, never run.
TEST_F(MegakernelVsLayered, RefusesBatchesAboveItsMaximum) {
  Load(1);
  EXPECT_THROW(
      MegakernelDecoder(backend_->config(), backend_->weights(), *panels_, backend_->kv_pool(),
                        MegakernelDecoderOptions{.max_batch = kMaxMegakernelBatch + 1}),
      Error);
  MegakernelDecoder small(backend_->config(), backend_->weights(), *panels_, backend_->kv_pool(),
                          MegakernelDecoderOptions{.max_batch = 8});
  const auto rows = cuda::MakeDecodeBatch(*backend_, 9, 100);
  const cuda::StepPlan plan = cuda::BuildStepPlan(backend_->config(), backend_->kv_layout(),
                                                  rows->inputs, backend_->max_num_tokens());
  cuda::DeviceBuffer<float> logits(9 * backend_->config().vocab_size);
  EXPECT_THROW(small.Run(plan, logits.data(), StepSampling{argmax_.device()}, backend_->stream()),
               Error);
}

// A step started with its tokens taken from the other slot's picks names rows that step had: a
// row it did not have, or a list of the wrong length, is refused before anything is enqueued,
// and the slot stays free.
TEST_F(MegakernelVsLayered, RefusesPickRowsTheOtherSlotDidNotRun) {
  Load(1);
  const auto rows = cuda::MakeDecodeBatch(*backend_, 2, 100);
  const cuda::StepPlan plan = cuda::BuildStepPlan(backend_->config(), backend_->kv_layout(),
                                                  rows->inputs, backend_->max_num_tokens());
  cuda::DeviceBuffer<float> logits(2 * backend_->config().vocab_size);
  const StepSampling sampling{argmax_.device()};
  decoder_->Start(plan, logits.data(), sampling, backend_->stream(), 0);
  decoder_->Finish(0);
  for (const std::vector<int32_t>& pick_rows :
       {std::vector<int32_t>{0, 2}, std::vector<int32_t>{0}, std::vector<int32_t>{-2, 0}}) {
    EXPECT_THROW(decoder_->Start(plan, logits.data(), sampling, backend_->stream(), 1, pick_rows),
                 Error);
  }
  decoder_->Start(plan, logits.data(), sampling, backend_->stream(), 1, std::vector<int32_t>{1, 0});
  decoder_->Finish(1);
}

// The attention MMA holds a KV head's query heads as its 8 columns: a model with more query heads
// per KV head is refused, never run.
TEST_F(MegakernelVsLayered, RefusesMoreThan8QueryHeadsPerKvHead) {
  Load(1);
  ModelConfig wide = backend_->config();
  wide.num_kv_heads = 2;  // 16 query heads on each
  try {
    MegakernelDecoder decoder(wide, backend_->weights(), *panels_, backend_->kv_pool());
    ADD_FAILURE() << "a model with 16 query heads per KV head was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("8 query heads per KV head"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mkserve::megakernel::testing
