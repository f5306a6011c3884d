// Prompt chunks beside the steps on the CUDA backend (prefill/chunk_stream.h), at full North
// width (5 layers, random bf16 weights): a long prompt that arrives while 8 streams decode is
// prefilled on the second stream (the streams decoding through the layered path or the
// megakernel), and its first token's distribution must match the same prompt prefilled inside
// steps (a chunk that wrote the wrong blocks, raced the steps or read a stale
// workspace changes it entirely), also when the chunk is longer than the workspace and runs in
// pieces; a chunk the backend cannot run is a named error before any GPU
// work, and a second chunk is refused while the first runs.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "common/error.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "gpu_test_util.h"
#include "model/presets.h"

namespace mkserve::cuda::testing {
namespace {

using mkserve::testing::Collected;
using mkserve::testing::Drain;

constexpr int64_t kStreams = 8;
constexpr int64_t kLongPrompt = 5000;
constexpr int64_t kChunkTokens = 2048;
constexpr int64_t kStepTokens = 4096;  // the workspace: a longer chunk runs in pieces of this
constexpr int32_t kTopLogprobs = 8;

EngineRequest Request(int64_t index, int64_t prompt_tokens, int32_t max_tokens) {
  EngineRequest request;
  for (int64_t i = 0; i < prompt_tokens; ++i) {
    request.prompt_token_ids.push_back(
        static_cast<int32_t>((i * 7919 + index * 104729) % 200000 + 8));
  }
  request.sampling.max_tokens = max_tokens;
  request.sampling.ignore_eos = true;
  request.sampling.temperature = 0.0f;
  request.sampling.num_logprobs = kTopLogprobs;
  return request;
}

// A long prompt at full width takes seconds, not the CPU tests' 20.
constexpr std::chrono::seconds kRequestTimeout(120);

std::unique_ptr<CudaBackend> MakeBackend(int64_t chunk_tokens,
                                         const std::string& decode_path = "layered") {
  ModelConfig config = NmcPreset(5);
  CudaBackendOptions options;
  options.max_batch = 16;
  options.max_num_tokens = kStepTokens;
  options.max_prompt_chunk_tokens = chunk_tokens;
  options.decode_path = decode_path;
  options.warmup_context_tokens = 0;
  options.kv_layout = PlanKvLayout(config, int64_t{2} << 30, 2 * config.kv_width() * 2, 16);
  return std::make_unique<CudaBackend>(config, DeviceWeights::Random(config, /*seed=*/7), options);
}

struct LongPromptRun {
  PositionLogprobs first;  // the long prompt's first output token
  int64_t chunk_tokens = 0;
};

// 8 streams decode; then the long prompt arrives.
LongPromptRun LongPromptBesideStreams(int64_t chunk_tokens,
                                      const std::string& decode_path = "layered") {
  std::unique_ptr<CudaBackend> backend = MakeBackend(chunk_tokens, decode_path);
  EngineOptions options;
  options.max_batch = 16;
  options.max_step_tokens = kStepTokens;
  options.max_prefill_tokens_while_decoding = 256;
  options.prompt_chunk_tokens = backend->max_prompt_chunk_tokens();
  Engine engine(std::move(backend), options);
  std::vector<RequestHandle> streams;
  for (int64_t i = 0; i < kStreams; ++i) streams.push_back(engine.Submit(Request(i, 100, 400)));
  while (engine.Snapshot().generation_tokens_total < kStreams) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  RequestHandle long_prompt = engine.Submit(Request(100, kLongPrompt, 4));
  const Collected out = Drain(long_prompt, kRequestTimeout);
  EXPECT_FALSE(out.error.has_value()) << out.error->message;
  const std::vector<PositionLogprobs> logprobs =
      out.logprobs.count(0) ? out.logprobs.at(0) : std::vector<PositionLogprobs>{};
  EXPECT_EQ(logprobs.size(), 4u);
  LongPromptRun run;
  if (!logprobs.empty()) run.first = logprobs.front();
  EXPECT_GT(engine.Snapshot().generation_tokens_total - 4, kStreams * 2)
      << "the streams were not decoding while the prompt arrived";
  for (RequestHandle& stream : streams) {
    const Collected rest = Drain(stream, kRequestTimeout);
    EXPECT_FALSE(rest.error.has_value()) << rest.error->message;
  }
  const EngineSnapshot snapshot = engine.Snapshot();
  run.chunk_tokens = snapshot.prompt_chunk_tokens_total;
  if (decode_path == "megakernel") {  // no decode step fell back to another path
    EXPECT_GT(snapshot.decode_steps_by_path.count("megakernel"), 0u);
    EXPECT_EQ(snapshot.decode_steps_by_path.size(), 1u);
  }
  return run;
}

void ExpectSameFirstToken(const LongPromptRun& inside, const LongPromptRun& beside) {
  EXPECT_EQ(beside.chunk_tokens, kLongPrompt - 1);
  ASSERT_EQ(inside.first.top.size(), static_cast<size_t>(kTopLogprobs));
  ASSERT_EQ(beside.first.top.size(), static_cast<size_t>(kTopLogprobs));
  std::map<int32_t, float> reference;
  for (const TokenLogprob& t : inside.first.top) reference[t.token_id] = t.logprob;
  int64_t shared = 0;
  for (const TokenLogprob& t : beside.first.top) {
    auto it = reference.find(t.token_id);
    if (it == reference.end()) continue;
    ++shared;
    EXPECT_NEAR(t.logprob, it->second, 0.05) << "token " << t.token_id;
  }
  // bf16 rounding may swap the last places of the top list, never most of it.
  EXPECT_GE(shared, kTopLogprobs - 2);
  const float margin = inside.first.top[0].logprob - inside.first.top[1].logprob;
  if (margin > 0.05f) {
    EXPECT_EQ(beside.first.chosen.token_id, inside.first.chosen.token_id);
  }
}

TEST(PromptChunkTest, ALongPromptBesideDecodingStreamsMatchesItsPrefillInsideSteps) {
  RequireGpu();
  const LongPromptRun inside = LongPromptBesideStreams(0);
  EXPECT_EQ(inside.chunk_tokens, 0);
  // Chunks of 2048, 2048, 903, then the last token in a step; or one chunk of 4999 in two pieces.
  for (int64_t chunk_tokens : {kChunkTokens, 2 * kStepTokens}) {
    SCOPED_TRACE("chunks of " + std::to_string(chunk_tokens));
    ExpectSameFirstToken(inside, LongPromptBesideStreams(chunk_tokens));
  }
}

// The same beside steps the megakernel runs (its cooperative launch waits for the SMs a chunk's
// kernels hold; the streams' decode steps must all go through it and none may fail).
TEST(PromptChunkTest, ALongPromptBesideMegakernelStepsMatchesItsPrefillInsideSteps) {
  RequireGpu();
  const LongPromptRun inside = LongPromptBesideStreams(0, "megakernel");
  EXPECT_EQ(inside.chunk_tokens, 0);
  ExpectSameFirstToken(inside, LongPromptBesideStreams(kChunkTokens, "megakernel"));
}

TEST(PromptChunkTest, ABadChunkIsANamedErrorAndOneChunkRunsAtATime) {
  RequireGpu();
  std::unique_ptr<CudaBackend> backend = MakeBackend(kChunkTokens);
  const KvLayout& layout = backend->kv_layout();
  std::vector<int32_t> tokens(kChunkTokens, 11);
  std::vector<std::vector<int32_t>> tables(layout.groups.size());
  for (size_t g = 0; g < tables.size(); ++g) {
    for (int64_t b = 0; b < kChunkTokens / kBlockTokens; ++b) tables[g].push_back(b);
  }
  SequenceStep chunk;
  chunk.token_ids = tokens;
  chunk.prompt_token_ids = tokens;
  for (const auto& table : tables) chunk.block_tables.push_back(table);
  SequenceStep too_long = chunk;
  std::vector<int32_t> more(kChunkTokens + 1, 11);
  too_long.token_ids = more;
  EXPECT_THROW(backend->StartPromptChunk(too_long), Error);
  SequenceStep unmapped = chunk;
  std::vector<int32_t> short_table = {0};
  unmapped.block_tables[0] = short_table;
  EXPECT_THROW(backend->StartPromptChunk(unmapped), Error);
  SequenceStep sampling = chunk;
  sampling.sample = true;
  EXPECT_THROW(backend->StartPromptChunk(sampling), Error);
  std::unique_ptr<PendingChunk> first = backend->StartPromptChunk(chunk);
  ASSERT_NE(first, nullptr);
  if (!first->Wait(std::chrono::microseconds(0))) {  // still running: a second one is refused
    EXPECT_THROW(backend->StartPromptChunk(chunk), Error);
  }
  EXPECT_TRUE(first->Wait(std::chrono::seconds(10)));
  std::unique_ptr<PendingChunk> second = backend->StartPromptChunk(chunk);
  EXPECT_TRUE(second->Wait(std::chrono::seconds(10)));
}

}  // namespace
}  // namespace mkserve::cuda::testing
