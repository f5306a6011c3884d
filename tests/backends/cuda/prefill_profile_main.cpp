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

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/device_buffer.h"
#include "backends/cuda/core/random_fill.h"
#include "backends/cuda/decode/attention.h"
#include "backends/cuda/decode/linear.h"
#include "backends/cuda/decode/router.h"
#include "backends/cuda/prefill/grouped_gemm.h"
#include "backends/cuda/prefill/prefill_attention.h"
#include "backends/cuda/prefill/router_prefill.h"
#include "backends/cuda/tools/decode_bench.h"
#include "backends/cuda/tools/prefill_profile.h"
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
  const int64_t heads = 32, kv_heads = 4, dim = 128,
                pages = (tokens + kBlockTokens - 1) / kBlockTokens;
  DeviceBuffer<__nv_bfloat16> cache(pages * kBlockTokens * 2 * kv_heads * dim);
  DeviceBuffer<__nv_bfloat16> q(tokens * heads * dim), out(tokens * heads * dim);
  DeviceBuffer<float> carry_acc(tokens * heads * dim),
      carry_stats(tokens * heads * kPrefillCarryStats);
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
    const double prefill = KernelMs([&] {
      PrefillAttention(a, {carry_acc.data(), carry_stats.data()}, nullptr);
    });
    std::printf("| paged (decode kernel) | %lld | %.3f | %.1f |\n", static_cast<long long>(window),
                paged, flop / paged / 1e9);
    std::printf("| prefill (tensor cores) | %lld | %.3f | %.1f |\n", static_cast<long long>(window),
                prefill, flop / prefill / 1e9);
  }
}

// North's router on one chunk: the CUDA-core RouterLogits vs the tensor-core split kernel.
void RouterKernels(int64_t tokens) {
  const int64_t hidden = 2048, experts = 128;
  DeviceBuffer<__nv_bfloat16> w(experts * hidden);
  DeviceBuffer<float> x(tokens * hidden), out(tokens * experts);
  FillNormal(w.data(), w.count(), 0.0f, 0.02f, 3, 1, nullptr);
  MKSERVE_CUDA_CHECK(cudaMemset(x.data(), 0, x.bytes()));  // timing only: values do not matter
  const double plain = KernelMs(
      [&] { RouterLogits(x.data(), tokens, hidden, w.data(), experts, out.data(), nullptr); });
  const double split = KernelMs([&] {
    RouterLogitsPrefill(x.data(), tokens, hidden, w.data(), experts, out.data(), nullptr);
  });
  std::printf(
      "\n| router logits, %lld tokens | ms |\n|---|---|\n| RouterLogits | %.3f |\n"
      "| RouterLogitsPrefill | %.3f |\n",
      static_cast<long long>(tokens), plain, split);
}

// North's expert GEMMs on one chunk (uniform routing: rows / 128 per expert) against one cuBLAS
// GEMM of the same total size, the ceiling a grouped GEMM could reach.
void ExpertKernels(int64_t tokens) {
  const int64_t hidden = 2048, inter = 768, experts = 128, rows = tokens * 8;
  DeviceBuffer<__nv_bfloat16> x(rows * hidden), gate_up(experts * 2 * inter * hidden);
  DeviceBuffer<__nv_bfloat16> down(experts * hidden * inter), h(rows * inter);
  DeviceBuffer<float> out(rows * hidden), wide(rows * 2 * inter);
  FillNormal(x.data(), x.count(), 0.0f, 1.0f, 4, 0, nullptr);
  FillNormal(gate_up.data(), gate_up.count(), 0.0f, 0.02f, 4, 1, nullptr);
  FillNormal(down.data(), down.count(), 0.0f, 0.02f, 4, 2, nullptr);
  std::vector<int32_t> offsets(experts + 1);
  for (int64_t e = 0; e <= experts; ++e) offsets[e] = static_cast<int32_t>(rows * e / experts);
  DeviceBuffer<int32_t> d_offsets(experts + 1);
  MKSERVE_CUDA_CHECK(
      cudaMemcpy(d_offsets.data(), offsets.data(), d_offsets.bytes(), cudaMemcpyDefault));
  GroupedGemmArgs up{x.data(),         nullptr, gate_up.data(),
                     d_offsets.data(), experts, rows,
                     hidden,           inter,   GroupedEpilogue::kSiluMulBf16,
                     h.data()};
  GroupedGemmArgs dn{h.data(), nullptr, down.data(), d_offsets.data(),           experts,
                     rows,     inter,   hidden,      GroupedEpilogue::kStoreF32, out.data()};
  const double t_up = KernelMs([&] { GroupedGemm(up, nullptr); });
  const double t_down = KernelMs([&] { GroupedGemm(dn, nullptr); });
  cublasHandle_t cublas;
  MKSERVE_CUBLAS_CHECK(cublasCreate(&cublas));
  const double c_up = KernelMs([&] {
    GemmCublas(cublas, x.data(), rows, hidden, gate_up.data(), 2 * inter, 1.0f, wide.data(),
               nullptr);
  });
  const double c_down = KernelMs([&] {
    GemmCublas(cublas, h.data(), rows, inter, down.data(), hidden, 1.0f, out.data(), nullptr);
  });
  cublasDestroy(cublas);
  const double flop_up = 2.0 * rows * 2 * inter * hidden, flop_down = 2.0 * rows * hidden * inter;
  std::printf("\n| experts, %lld tokens | ms | TFLOP/s |\n|---|---|---|\n",
              static_cast<long long>(tokens));
  std::printf("| grouped gate/up + silu | %.3f | %.0f |\n| grouped down | %.3f | %.0f |\n", t_up,
              flop_up / t_up / 1e9, t_down, flop_down / t_down / 1e9);
  std::printf("| cuBLAS one GEMM gate/up | %.3f | %.0f |\n| cuBLAS one GEMM down | %.3f | %.0f |\n",
              c_up, flop_up / c_up / 1e9, c_down, flop_down / c_down / 1e9);
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
  RouterKernels(8192);
  ExpertKernels(8192);
  std::vector<std::string> rows;
  for (int64_t chunk : chunks) {
    CudaBackendOptions options;
    options.random_weights = true;
    options.max_num_tokens = chunk;
    auto hooks = std::make_shared<ToolHooks>();
    options.hooks = hooks;
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
    if (chunk == chunks.front()) {
      for (int64_t prompt : prompts) {
        PrintProfile(ProfilePrefill(*backend, *hooks, prompt));
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
