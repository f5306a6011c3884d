// cuda_sampler_bench (a benchmark tool, not a test; run on the GPU machine): the GPU sampler's
// kernel alone (LaunchSampleRows, one cluster a row) on a batch of full-vocabulary rows, per row
// shape and parameter set, kernel ms as the median of timed launches. Each case's tokens are
// first checked against the CPU sampler (SampleFromLogits) on its first rows, so a faster kernel
// that samples wrongly does not print a figure. Prints a markdown table.
//   cuda_sampler_bench [--batch 64] [--vocab 262144] [--runs 20] [--checked 4]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/device_buffer.h"
#include "backends/cuda/sampling/gpu_sampler.h"
#include "backends/cuda/sampling/sample_rows.h"
#include "common/args.h"
#include "engine/sampler.h"
#include "gpu_test_util.h"
#include "sampling_cases.h"

namespace mkserve::cuda::testing {
namespace {

struct ParameterSet {
  const char* name;
  float temperature, top_p;
  int32_t top_k, num_logprobs;
};

constexpr ParameterSet kSets[] = {
    {"greedy", 0.0f, 1.0f, 0, -1},
    {"temperature 0.7", 0.7f, 1.0f, 0, -1},
    {"temperature 0.7, top-p 0.95", 0.7f, 0.95f, 0, -1},
    {"temperature 0.7, top-k 40, top-p 0.95", 0.7f, 0.95f, 40, -1},
    {"temperature 0.7, top-p 0.95, 5 logprobs", 0.7f, 0.95f, 0, 5},
};

double MedianKernelMs(GpuSampler& sampler, float* logits, int64_t vocab,
                      std::span<const GpuSampleRequest> requests, int64_t rows, int runs) {
  const StagedSamples staged = sampler.Stage(rows, requests, nullptr);
  cudaEvent_t start, stop;
  MKSERVE_CUDA_CHECK(cudaEventCreate(&start));
  MKSERVE_CUDA_CHECK(cudaEventCreate(&stop));
  LaunchSampleRows(logits, vocab, staged, nullptr);  // warm-up
  std::vector<float> times;
  for (int r = 0; r < runs; ++r) {
    MKSERVE_CUDA_CHECK(cudaEventRecord(start));
    LaunchSampleRows(logits, vocab, staged, nullptr);
    MKSERVE_CUDA_CHECK(cudaEventRecord(stop));
    MKSERVE_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    MKSERVE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  sampler.Collect(nullptr);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

int Run(int64_t batch, int64_t vocab, int runs, int checked) {
  std::printf("| rows | shape | parameters | kernel ms | checked rows |\n|---|---|---|---|---|\n");
  for (Shape shape : {Shape::kFlat, Shape::kPeaked}) {
    std::vector<float> logits;
    for (int64_t i = 0; i < batch; ++i) {
      const std::vector<float> row = MakeRow(shape, vocab, 500 + static_cast<uint32_t>(i));
      logits.insert(logits.end(), row.begin(), row.end());
    }
    DeviceBuffer<float> device = ToDevice(logits);
    for (const ParameterSet& set : kSets) {
      std::vector<Case> cases(batch);
      std::vector<GpuSampleRequest> requests;
      for (int64_t i = 0; i < batch; ++i) {
        Case& c = cases[i];
        c.params.temperature = set.temperature;
        c.params.top_p = set.top_p;
        c.params.top_k = set.top_k;
        c.params.num_logprobs = set.num_logprobs;
        c.params.seed = 77 + i;
        Link(c, 9000 + i, 3);
        requests.push_back({i, &c.step});
      }
      GpuSampler sampler(vocab);
      // No edits (penalties, bias), so the rows are unchanged by a launch and each run is alike.
      const std::vector<SequenceResult> got = sampler.Sample(device.data(), batch, requests, 0);
      const int64_t check = std::min<int64_t>(checked, batch);
      for (int64_t i = 0; i < check; ++i) {
        const std::span<const float> row(logits.data() + i * vocab, vocab);
        const SequenceResult want = SampleFromLogits(row, cases[i].step);
        if (got[i].token_id != want.token_id) {
          std::fprintf(stderr, "%s row %lld: GPU token %d, CPU token %d\n", set.name,
                       static_cast<long long>(i), got[i].token_id, want.token_id);
          return 1;
        }
      }
      const double ms = MedianKernelMs(sampler, device.data(), vocab, requests, batch, runs);
      std::printf("| %lld | %s | %s | %.3f | %lld |\n", static_cast<long long>(batch),
                  shape == Shape::kFlat ? "flat" : "peaked", set.name, ms,
                  static_cast<long long>(check));
    }
  }
  return 0;
}

}  // namespace
}  // namespace mkserve::cuda::testing

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> words(argv + 1, argv + argc);
    mkserve::Args args(words);
    const int64_t batch = args.Int("batch", 64, 1, 1024);
    const int64_t vocab = args.Int("vocab", 262144, 2, mkserve::cuda::kGpuSamplerMaxVocab);
    const int runs = static_cast<int>(args.Int("runs", 20, 1, 10000));
    const int checked = static_cast<int>(args.Int("checked", 4, 0, 1024));
    args.Finish();
    return mkserve::cuda::testing::Run(batch, vocab, runs, checked);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_sampler_bench: %s\n", e.what());
    return 1;
  }
}
