// CudaBackend against CpuBackend (the fp32 oracle) on one random tiny North-shaped checkpoint
// (head_dim 128): a ragged batch of prefills across several KV pages and the sliding window, then
// greedy decode with every row of the batch; each row must also match the same sequence run
// alone, and seeded sampling must not depend on the batch slot. Every test runs once per
// registered decode path (DecodePathNames()): a new path is tested by registering it.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "backend_test_util.h"
#include "backends/cpu/load_cpu_backend.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/decode/decode_path_registry.h"
#include "backends/cuda/decode/graph_decode_path.h"
#include "gpu_test_util.h"
#include "model/presets.h"
#include "model/random_checkpoint.h"

namespace mkserve::cuda::testing {
namespace {

constexpr double kMinCosine = 0.999;
constexpr int kDecodeSteps = 6;

// The tiny North-shaped model with head_dim 128 (and hidden 128): a geometry every registered
// decode path runs (the megakernel's op bodies are written for head_dim 128).
ModelConfig VsCpuConfig() {
  nlohmann::json json = TinyPreset(6).ToJson();
  json["head_dim"] = 128;
  json["hidden_size"] = 128;
  return ModelConfig::FromJson(json);
}

int64_t NumGraphs(const CudaBackend& backend) {
  const auto* graph = dynamic_cast<const GraphDecodePath*>(backend.FindDecodePath("graph"));
  return graph != nullptr ? graph->num_graphs() : 0;
}

class CudaVsCpuTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    dir_ =
        new std::filesystem::path(std::filesystem::temp_directory_path() / "mkserve_cuda_vs_cpu");
    RandomCheckpointOptions options;
    options.seed = 77;
    WriteRandomCheckpoint(VsCpuConfig(), options, *dir_);
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  void SetUp() override {
    CpuBackendOptions cpu_options;
    cpu_options.num_blocks = 64;
    cpu_options.max_batch = 8;
    cpu_ = LoadCpuBackend(*dir_, cpu_options);
    CudaBackendOptions options;
    options.kv_layout = cpu_->kv_layout();
    options.max_num_tokens = 1024;
    options.decode_path = GetParam();
    cuda_ = LoadCudaBackend(*dir_, options);
  }
  // The decode path under test is the one that serves `inputs` (it is tried first).
  void ExpectPathAccepts(const StepInputs& inputs) const {
    const DecodePath* path = cuda_->FindDecodePath(GetParam());
    ASSERT_NE(path, nullptr);
    const StepPlan plan = BuildStepPlan(cuda_->config(), cuda_->kv_layout(), inputs, 1024);
    EXPECT_TRUE(path->Accepts(plan)) << GetParam() << " refused a plain decode step";
  }
  // A ragged batch of prefills, then greedy decode steps of every row, against the CPU.
  void ExpectRaggedBatchMatchesTheCpu();
  std::vector<int32_t> Prompt(int64_t length, int seed) const {
    std::vector<int32_t> ids(length);
    for (int64_t i = 0; i < length; ++i)
      ids[i] = static_cast<int32_t>((i * 131 + seed * 17) % 1000 + 3);
    return ids;
  }

  static std::filesystem::path* dir_;
  std::unique_ptr<CpuBackend> cpu_;
  std::unique_ptr<CudaBackend> cuda_;
};
std::filesystem::path* CudaVsCpuTest::dir_ = nullptr;

TEST_P(CudaVsCpuTest, RaggedBatchPrefillAndGreedyDecode) { ExpectRaggedBatchMatchesTheCpu(); }

// Decode steps of a few rows through the tensor-core grouped experts (the threshold at 1 token),
// as batches of 16 and more take them on North.
TEST_P(CudaVsCpuTest, GroupedExpertsInDecodeStepsMatchTheCpu) {
  CudaBackendOptions options;
  options.kv_layout = cpu_->kv_layout();
  options.max_num_tokens = 1024;
  options.decode_path = GetParam();
  options.grouped_moe_min_tokens = 1;
  cuda_ = LoadCudaBackend(*dir_, options);
  ExpectRaggedBatchMatchesTheCpu();
}

void CudaVsCpuTest::ExpectRaggedBatchMatchesTheCpu() {
  const SamplingParams greedy = GreedyParams();
  const std::vector<int64_t> lengths = {150, 1, 40, 64};
  SimpleBlocks blocks(cuda_->kv_layout());
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<std::vector<int32_t>>> tables;
  StepInputs prefill;
  for (size_t s = 0; s < lengths.size(); ++s) {
    prompts.push_back(Prompt(lengths[s], static_cast<int>(s)));
    tables.push_back(blocks.Allocate(lengths[s] + kDecodeSteps));
  }
  for (size_t s = 0; s < lengths.size(); ++s) {
    prefill.sequences.push_back(
        MakeStep(static_cast<int64_t>(s), prompts[s], 0, tables[s], &greedy, true));
  }
  StepOutputs gpu = cuda_->Step(prefill), cpu = cpu_->Step(prefill);
  std::vector<int32_t> last(lengths.size());
  for (size_t s = 0; s < lengths.size(); ++s) {
    for (size_t t = 0; t < prompts[s].size(); ++t) {
      EXPECT_GE(Cosine(gpu.results[s].logits[t], cpu.results[s].logits[t]), kMinCosine)
          << "sequence " << s << " position " << t;
    }
    ExpectSameGreedy(gpu.results[s].token_id, cpu.results[s].token_id, cpu.results[s].logits.back(),
                     "prefill sequence " + std::to_string(s));
    last[s] = cpu.results[s].token_id;
  }
  for (int step = 0; step < kDecodeSteps; ++step) {
    StepInputs decode;
    std::vector<std::vector<int32_t>> tokens;
    for (size_t s = 0; s < lengths.size(); ++s) tokens.push_back({last[s]});
    for (size_t s = 0; s < lengths.size(); ++s) {
      decode.sequences.push_back(MakeStep(static_cast<int64_t>(s), tokens[s], lengths[s] + step,
                                          tables[s], &greedy, true));
    }
    StepOutputs g = cuda_->Step(decode), c = cpu_->Step(decode);
    for (size_t s = 0; s < lengths.size(); ++s) {
      EXPECT_GE(Cosine(g.results[s].logits[0], c.results[s].logits[0]), kMinCosine)
          << "decode " << step << " row " << s;
      ExpectSameGreedy(g.results[s].token_id, c.results[s].token_id, c.results[s].logits[0],
                       "decode " + std::to_string(step) + " row " + std::to_string(s));
      last[s] = c.results[s].token_id;  // CPU-forced, so one flip cannot cascade
    }
  }
}

TEST_P(CudaVsCpuTest, BatchRowMatchesTheSameSequenceAlone) {
  const std::vector<int64_t> lengths = {90, 7, 33};
  SimpleBlocks blocks(cuda_->kv_layout());
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<std::vector<int32_t>>> batch_tables, alone_tables;
  StepInputs batch;
  for (size_t s = 0; s < lengths.size(); ++s) {
    prompts.push_back(Prompt(lengths[s], 10 + static_cast<int>(s)));
    batch_tables.push_back(blocks.Allocate(lengths[s]));
    alone_tables.push_back(blocks.Allocate(lengths[s]));
  }
  for (size_t s = 0; s < lengths.size(); ++s) {
    batch.sequences.push_back(
        MakeStep(static_cast<int64_t>(s), prompts[s], 0, batch_tables[s], nullptr, true));
  }
  StepOutputs together = cuda_->Step(batch);
  for (size_t s = 0; s < lengths.size(); ++s) {
    StepInputs alone;
    alone.sequences.push_back(MakeStep(0, prompts[s], 0, alone_tables[s], nullptr, true));
    StepOutputs single = cuda_->Step(alone);
    const auto& a = together.results[s].logits.back();
    const auto& b = single.results[0].logits.back();
    EXPECT_GE(Cosine(a, b), 0.9999) << "sequence " << s;  // GEMM paths differ by batch size
  }
}

TEST_P(CudaVsCpuTest, SeededSamplingDoesNotDependOnTheSlot) {
  SamplingParams seeded;
  seeded.temperature = 0.9f;
  seeded.top_p = 0.95f;
  seeded.seed = 1234;
  seeded.num_logprobs = 2;
  const SamplingParams greedy = GreedyParams();
  const std::vector<int32_t> prompt = Prompt(20, 3), other = Prompt(12, 4);
  SimpleBlocks blocks(cuda_->kv_layout());
  const auto t1 = blocks.Allocate(20), t2 = blocks.Allocate(12), t3 = blocks.Allocate(20);
  StepInputs first, second;
  first.sequences.push_back(MakeStep(1, prompt, 0, t1, &seeded, false));
  second.sequences.push_back(MakeStep(2, other, 0, t2, &greedy, false));
  second.sequences.push_back(MakeStep(3, prompt, 0, t3, &seeded, false));
  const SequenceResult a = cuda_->Step(first).results[0];
  const SequenceResult b = cuda_->Step(second).results[1];
  EXPECT_EQ(a.token_id, b.token_id);
  ASSERT_EQ(a.logprobs.top.size(), 2u);
  EXPECT_EQ(a.logprobs.chosen.token_id, a.token_id);
  EXPECT_NEAR(a.logprobs.chosen.logprob, b.logprobs.chosen.logprob, 1e-4);
}

// Decode steps as serving sends them (no host logits), through the path under test.
TEST_P(CudaVsCpuTest, DecodeMatchesCpu) {
  const SamplingParams greedy = GreedyParams();
  const std::vector<int64_t> lengths = {60, 3, 126};  // contexts cross page buckets while decoding
  constexpr int kSteps = 8;
  SimpleBlocks blocks(cuda_->kv_layout());
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<std::vector<int32_t>>> tables;
  StepInputs prefill;
  for (size_t s = 0; s < lengths.size(); ++s) {
    prompts.push_back(Prompt(lengths[s], 20 + static_cast<int>(s)));
    tables.push_back(blocks.Allocate(lengths[s] + kSteps));
  }
  for (size_t s = 0; s < lengths.size(); ++s) {
    prefill.sequences.push_back(
        MakeStep(static_cast<int64_t>(s), prompts[s], 0, tables[s], &greedy, false));
  }
  cuda_->Step(prefill);  // prefill chunks never take the graph path
  StepOutputs cpu_prefill = cpu_->Step(prefill);
  std::vector<int32_t> last;
  for (const auto& r : cpu_prefill.results) last.push_back(r.token_id);
  for (int step = 0; step < kSteps; ++step) {
    std::vector<std::vector<int32_t>> tokens;
    for (int32_t t : last) tokens.push_back({t});
    StepInputs gpu_in, cpu_in;
    for (size_t s = 0; s < lengths.size(); ++s) {
      gpu_in.sequences.push_back(MakeStep(static_cast<int64_t>(s), tokens[s], lengths[s] + step,
                                          tables[s], &greedy, false));
      cpu_in.sequences.push_back(MakeStep(static_cast<int64_t>(s), tokens[s], lengths[s] + step,
                                          tables[s], &greedy, true));
    }
    ExpectPathAccepts(gpu_in);
    StepOutputs g = cuda_->Step(gpu_in), c = cpu_->Step(cpu_in);
    for (size_t s = 0; s < lengths.size(); ++s) {
      ExpectSameGreedy(g.results[s].token_id, c.results[s].token_id, c.results[s].logits[0],
                       "decode " + std::to_string(step) + " row " + std::to_string(s));
      last[s] = c.results[s].token_id;
    }
  }
  if (GetParam() == "graph") {
    EXPECT_GE(NumGraphs(*cuda_), 2);  // context 127 -> 134 goes from 2 pages to 3 (bucket 4)
  }
}

// Sampled (non-greedy) decode steps go through the path too (the GPU sampler reads the logits it
// left): the same tokens and logprobs as the eager step on the same KV state.
TEST_P(CudaVsCpuTest, SampledDecodeMatchesEager) {
  SamplingParams seeded;
  seeded.temperature = 0.8f;
  seeded.top_p = 0.9f;
  seeded.seed = 77;
  seeded.num_logprobs = 3;
  seeded.presence_penalty = 0.5f;
  const SamplingParams greedy = GreedyParams();
  const std::vector<int64_t> lengths = {45, 9};
  SimpleBlocks blocks(cuda_->kv_layout());
  std::vector<std::vector<int32_t>> prompts, last;
  std::vector<std::vector<std::vector<int32_t>>> tables;
  StepInputs prefill;
  for (size_t s = 0; s < lengths.size(); ++s) {
    prompts.push_back(Prompt(lengths[s], 40 + static_cast<int>(s)));
    tables.push_back(blocks.Allocate(lengths[s] + 1));
    last.push_back({static_cast<int32_t>(100 + s)});
  }
  for (size_t s = 0; s < lengths.size(); ++s) {
    prefill.sequences.push_back(
        MakeStep(static_cast<int64_t>(s), prompts[s], 0, tables[s], &greedy, false));
  }
  cuda_->Step(prefill);
  StepInputs decode;  // row 0 sampled with penalties and logprobs, row 1 greedy
  for (size_t s = 0; s < lengths.size(); ++s) {
    decode.sequences.push_back(MakeStep(static_cast<int64_t>(s), last[s], lengths[s], tables[s],
                                        s == 0 ? &seeded : &greedy, false));
    decode.sequences.back().output_token_ids = last[s];
    decode.sequences.back().sample_index = 5;
  }
  cuda_->set_decode_path("eager");
  const StepOutputs eager = cuda_->Step(decode);
  cuda_->set_decode_path(GetParam());
  ExpectPathAccepts(decode);
  const StepOutputs replayed = cuda_->Step(decode);  // rewrites the same KV slots
  if (GetParam() == "graph") {
    EXPECT_EQ(NumGraphs(*cuda_), 1);
  }
  for (size_t s = 0; s < lengths.size(); ++s) {
    EXPECT_EQ(replayed.results[s].token_id, eager.results[s].token_id) << "row " << s;
  }
  const PositionLogprobs& a = eager.results[0].logprobs;
  const PositionLogprobs& b = replayed.results[0].logprobs;
  ASSERT_EQ(a.top.size(), 3u);
  ASSERT_EQ(b.top.size(), 3u);
  EXPECT_EQ(b.chosen.token_id, replayed.results[0].token_id);
  EXPECT_NEAR(a.chosen.logprob, b.chosen.logprob, 1e-3);  // split counts differ by mode
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(a.top[i].token_id, b.top[i].token_id) << i;
}

// A step holding a prompt chunk and decode rows gives every sequence exactly what a decode-only
// step and a prefill-only step give it: the decode rows run through the decode path under test,
// the chunk through the prefill kernels, as two sub-steps of the one Step.
TEST_P(CudaVsCpuTest, MixedStepEqualsDecodeStepPlusPrefillStep) {
  SamplingParams seeded;
  seeded.temperature = 0.8f;
  seeded.seed = 5;
  seeded.num_logprobs = 2;
  const SamplingParams greedy = GreedyParams();
  const std::vector<int64_t> contexts = {40, 97};
  const std::vector<int32_t> chunk = Prompt(70, 60);
  const std::vector<std::vector<int32_t>> next = {{101}, {202}};
  SimpleBlocks blocks(cuda_->kv_layout());
  // The decode sequences' KV twice, once for each run, filled by the same prefill.
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<std::vector<int32_t>>> mixed_tables, split_tables;
  for (size_t s = 0; s < contexts.size(); ++s) {
    prompts.push_back(Prompt(contexts[s], 50 + static_cast<int>(s)));
    mixed_tables.push_back(blocks.Allocate(contexts[s] + 1));
    split_tables.push_back(blocks.Allocate(contexts[s] + 1));
  }
  for (const auto* tables : {&mixed_tables, &split_tables}) {
    StepInputs prefill;
    for (size_t s = 0; s < contexts.size(); ++s) {
      prefill.sequences.push_back(
          MakeStep(static_cast<int64_t>(s), prompts[s], 0, (*tables)[s], &greedy, false));
    }
    cuda_->Step(prefill);
  }
  const auto mixed_chunk_table = blocks.Allocate(70), split_chunk_table = blocks.Allocate(70);
  auto decode_row = [&](const std::vector<std::vector<std::vector<int32_t>>>& tables, size_t s) {
    SequenceStep step = MakeStep(static_cast<int64_t>(s), next[s], contexts[s], tables[s],
                                 s == 0 ? &seeded : &greedy, false);
    step.sample_index = 3;
    return step;
  };
  StepInputs mixed, decode_only, prefill_only;
  mixed.sequences.push_back(MakeStep(9, chunk, 0, mixed_chunk_table, &greedy, true));
  for (size_t s = 0; s < contexts.size(); ++s) {
    mixed.sequences.push_back(decode_row(mixed_tables, s));
    decode_only.sequences.push_back(decode_row(split_tables, s));
  }
  prefill_only.sequences.push_back(MakeStep(9, chunk, 0, split_chunk_table, &greedy, true));
  ExpectPathAccepts(decode_only);
  const StepOutputs m = cuda_->Step(mixed);
  const StepOutputs d = cuda_->Step(decode_only);
  const StepOutputs p = cuda_->Step(prefill_only);
  EXPECT_EQ(m.results[0].token_id, p.results[0].token_id);
  EXPECT_EQ(m.results[0].logits, p.results[0].logits);  // bitwise: the same kernels ran
  for (size_t s = 0; s < contexts.size(); ++s) {
    const SequenceResult& a = m.results[1 + s];
    const SequenceResult& b = d.results[s];
    EXPECT_EQ(a.token_id, b.token_id) << "decode row " << s;
    EXPECT_EQ(a.logprobs.chosen.logprob, b.logprobs.chosen.logprob) << "decode row " << s;
    ASSERT_EQ(a.logprobs.top.size(), b.logprobs.top.size());
    for (size_t i = 0; i < a.logprobs.top.size(); ++i) {
      EXPECT_EQ(a.logprobs.top[i].token_id, b.logprobs.top[i].token_id) << s << " top " << i;
    }
  }
}

// WarmUp prepares the path before any step (graphs for batch 1..4 and page buckets 1, 2, 4 of a
// context up to 130 tokens); the live decode steps then capture nothing and still match the CPU.
TEST_P(CudaVsCpuTest, WarmUpPreparesTheDecodeStepsAhead) {
  CudaBackendOptions options;
  options.kv_layout = cpu_->kv_layout();
  options.max_num_tokens = 1024;
  options.max_batch = 4;
  options.warmup_context_tokens = 130;
  options.decode_path = GetParam();
  auto cuda = LoadCudaBackend(*dir_, options);
  int64_t last_done = 0, last_total = 0;
  const WarmUpReport report = cuda->WarmUp([&](int64_t done, int64_t total) {
    EXPECT_EQ(done, last_done + 1);
    last_done = done;
    last_total = total;
  });
  EXPECT_TRUE(report.error.empty()) << report.error;
  EXPECT_FALSE(report.stopped_early);
  if (GetParam() == "graph") {
    EXPECT_EQ(report.prepared, 12);
    EXPECT_EQ(NumGraphs(*cuda), 12);
    EXPECT_EQ(last_done, 12);
    EXPECT_EQ(last_total, 12);
  }
  if (GetParam() == "megakernel") {  // schedules of batch 1..4 in the buckets up to 131 tokens
    EXPECT_GT(report.prepared, 0);
    EXPECT_EQ(last_done, last_total);
  }
  const int64_t prepared = NumGraphs(*cuda);
  const SamplingParams greedy = GreedyParams();
  const std::vector<int64_t> lengths = {60, 3, 126};
  SimpleBlocks blocks(cuda->kv_layout());
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<std::vector<int32_t>>> tables;
  StepInputs prefill;
  for (size_t s = 0; s < lengths.size(); ++s) {
    prompts.push_back(Prompt(lengths[s], 70 + static_cast<int>(s)));
    tables.push_back(blocks.Allocate(lengths[s] + 2));
  }
  for (size_t s = 0; s < lengths.size(); ++s) {
    prefill.sequences.push_back(
        MakeStep(static_cast<int64_t>(s), prompts[s], 0, tables[s], &greedy, false));
  }
  cuda->Step(prefill);
  std::vector<int32_t> last;
  for (const auto& r : cpu_->Step(prefill).results) last.push_back(r.token_id);
  for (int step = 0; step < 2; ++step) {
    std::vector<std::vector<int32_t>> tokens;
    for (int32_t t : last) tokens.push_back({t});
    StepInputs gpu_in, cpu_in;
    for (size_t s = 0; s < lengths.size(); ++s) {
      gpu_in.sequences.push_back(MakeStep(static_cast<int64_t>(s), tokens[s], lengths[s] + step,
                                          tables[s], &greedy, false));
      cpu_in.sequences.push_back(MakeStep(static_cast<int64_t>(s), tokens[s], lengths[s] + step,
                                          tables[s], &greedy, true));
    }
    StepOutputs g = cuda->Step(gpu_in), c = cpu_->Step(cpu_in);
    for (size_t s = 0; s < lengths.size(); ++s) {
      ExpectSameGreedy(g.results[s].token_id, c.results[s].token_id, c.results[s].logits[0],
                       "warmed decode " + std::to_string(step) + " row " + std::to_string(s));
      last[s] = c.results[s].token_id;
    }
  }
  EXPECT_EQ(NumGraphs(*cuda), prepared) << "a live step captured a graph after the warm-up";
  EXPECT_EQ(cuda->WarmUp({}).prepared, 0) << "a second warm-up found something unprepared";
}

TEST_P(CudaVsCpuTest, BadBlockTableIsAnErrorNotAFault) {
  const SamplingParams greedy = GreedyParams();
  const std::vector<int32_t> prompt = Prompt(70, 5);
  std::vector<std::vector<int32_t>> tables(cuda_->kv_layout().num_groups(),
                                           std::vector<int32_t>{0});
  StepInputs inputs;
  inputs.sequences.push_back(MakeStep(1, prompt, 0, tables, &greedy, false));  // needs 2 pages
  EXPECT_THROW(cuda_->Step(inputs), Error);
}

INSTANTIATE_TEST_SUITE_P(DecodePaths, CudaVsCpuTest, ::testing::ValuesIn(DecodePathNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace mkserve::cuda::testing
