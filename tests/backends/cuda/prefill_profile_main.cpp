// cuda_prefill_profile (a benchmark tool, not a test; run on the GPU machine): prefill tok/s of
// North Mini Code with random weights per chunk size (max_num_tokens), the per-op GPU time of
// whole prompts, and the attention kernels alone on one 8K chunk (paged decode kernel vs the
// tensor-core prefill kernel). Prints markdown tables.
//   cuda_prefill_profile [--chunks 4096,8192,16384] [--prompts 1024,8192,32768]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cuda/attention.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/decode_bench.h"
#include "backends/cuda/device_buffer.h"
#include "backends/cuda/prefill_attention.h"
#include "backends/cuda/prefill_profile.h"
#include "backends/cuda/random_fill.h"
#include "engine/kv_layout.h"

namespace mkserve::cuda {
namespace {

constexpr int kPrefillRuns = 3;

std::vector<int64_t> ParseList(const std::string& text) {
  std::vector<int64_t> values;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) values.push_back(std::stoll(item));
  return values;
}

template <typename F>
double KernelMs(F&& launch) {
  cudaEvent_t start, stop;
  MKSERVE_CUDA_CHECK(cudaEventCreate(&start));
  MKSERVE_CUDA_CHECK(cudaEventCreate(&stop));
  launch();  // warm-up
  MKSERVE_CUDA_CHECK(cudaEventRecord(start));
  constexpr int kRuns = 5;
  for (int i = 0; i < kRuns; ++i) launch();
  MKSERVE_CUDA_CHECK(cudaEventRecord(stop));
  MKSERVE_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  MKSERVE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / kRuns;
}

// One sequence of `tokens` prompt tokens at North's attention shape, full and windowed.
void AttentionKernels(int64_t tokens) {
  const int64_t heads = 32, kv_heads = 4, dim = 128, pages = CeilDiv(tokens, kBlockTokens);
  DeviceBuffer<__nv_bfloat16> cache(pages * kBlockTokens * 2 * kv_heads * dim);
  DeviceBuffer<__nv_bfloat16> q(tokens * heads * dim), out(tokens * heads * dim);
  FillNormal(cache.data(), cache.count(), 0.0f, 1.0f, 1, 0, nullptr);
  FillNormal(q.data(), q.count(), 0.0f, 0.5f, 1, 1, nullptr);
  std::vector<int32_t> positions(tokens), seqs(tokens, 0), table(pages);
  for (int64_t i = 0; i < tokens; ++i) positions[i] = static_cast<int32_t>(i);
  for (int64_t p = 0; p < pages; ++p) table[p] = static_cast<int32_t>(p);
  DeviceBuffer<int32_t> d_pos(tokens), d_seq(tokens), d_table(pages);
  MKSERVE_CUDA_CHECK(cudaMemcpy(d_pos.data(), positions.data(), d_pos.bytes(), cudaMemcpyDefault));
  MKSERVE_CUDA_CHECK(cudaMemcpy(d_seq.data(), seqs.data(), d_seq.bytes(), cudaMemcpyDefault));
  MKSERVE_CUDA_CHECK(cudaMemcpy(d_table.data(), table.data(), d_table.bytes(), cudaMemcpyDefault));
  std::printf(
      "\n| attention, %lld-token chunk | window | ms | TFLOP/s (causal) |\n|---|---|---|---|\n",
      static_cast<long long>(tokens));
  for (int64_t window : {int64_t{0}, int64_t{4096}}) {
    AttentionArgs a{q.data(),   cache.data(), d_pos.data(), d_seq.data(), d_table.data(), pages,
                    tokens,     heads,        kv_heads,     dim,          window,         1,
                    out.data(), nullptr,      nullptr};
    double keys = 0;  // visible (query, key) pairs
    for (int64_t t = 0; t < tokens; ++t) keys += window > 0 && t >= window ? window : t + 1;
    const double flop = 4.0 * keys * heads * dim;
    const double paged = KernelMs([&] { PagedAttention(a, nullptr); });
    const double prefill = KernelMs([&] { PrefillAttention(a, nullptr); });
    std::printf("| paged (decode kernel) | %lld | %.3f | %.1f |\n", static_cast<long long>(window),
                paged, flop / paged / 1e9);
    std::printf("| prefill (tensor cores) | %lld | %.3f | %.1f |\n", static_cast<long long>(window),
                prefill, flop / prefill / 1e9);
  }
}

void PrintProfile(const PrefillProfile& p) {
  std::printf("\nbreakdown prompt %lld chunk %lld: wall %.1f ms, GPU %.1f ms\n\n",
              static_cast<long long>(p.prompt_tokens), static_cast<long long>(p.chunk_tokens),
              p.wall_ms, p.gpu_ms);
  std::printf("| op | ms/prompt | share |\n|---|---|---|\n");
  for (int i = 0; i < kNumStepOps; ++i) {
    std::printf("| %s | %.2f | %.1f%% |\n", StepOpName(static_cast<StepOp>(i)), p.op_ms[i],
                100.0 * p.op_ms[i] / p.gpu_ms);
  }
}

void Run(const std::vector<int64_t>& chunks, const std::vector<int64_t>& prompts) {
  AttentionKernels(8192);
  std::vector<std::string> rows;
  for (int64_t chunk : chunks) {
    CudaBackendOptions options;
    options.random_weights = true;
    options.max_num_tokens = chunk;
    auto backend = LoadCudaBackend("", options);
    backend->kv_pool().FillRandom(2, 0.01f);
    for (int64_t prompt : prompts) {
      const PrefillPoint p = BenchPrefill(*backend, prompt, kPrefillRuns);
      char row[160];
      std::snprintf(row, sizeof(row), "| %lld | %lld | %.1f | %.0f |",
                    static_cast<long long>(chunk), static_cast<long long>(prompt), p.ms,
                    p.tokens_per_second);
      rows.push_back(row);
      std::fprintf(stderr, "%s\n", row);
    }
    if (chunk == 8192) {
      for (int64_t prompt : prompts) {
        if (prompt >= 8192) PrintProfile(ProfilePrefill(*backend, prompt));
      }
    }
  }
  std::printf("\n| chunk | prompt tokens | ms | tok/s |\n|---|---|---|---|\n");
  for (const std::string& row : rows) std::printf("%s\n", row.c_str());
}

}  // namespace
}  // namespace mkserve::cuda

int main(int argc, char** argv) {
  std::vector<int64_t> chunks = {4096, 8192, 16384}, prompts = {1024, 8192, 32768};
  try {
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string flag = argv[i];
      if (flag == "--chunks") {
        chunks = mkserve::cuda::ParseList(argv[i + 1]);
      } else if (flag == "--prompts") {
        prompts = mkserve::cuda::ParseList(argv[i + 1]);
      } else {
        std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
        return 2;
      }
    }
    mkserve::cuda::Run(chunks, prompts);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
