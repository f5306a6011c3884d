#include "megakernel/device/megakernel_bench.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "backends/cuda/argmax.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_buffer.h"

namespace mkserve::megakernel {
namespace {

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

MegakernelPoint BenchMegakernelDecode(cuda::CudaBackend& backend, MegakernelDecoder& decoder,
                                      int64_t batch, int64_t context_tokens, int warmup_steps,
                                      int timed_steps, double read_bytes_per_second,
                                      int64_t distinct_experts) {
  const ModelConfig& config = backend.config();
  const auto decode_batch = cuda::MakeDecodeBatch(backend, batch, context_tokens);
  const cuda::StepPlan plan = backend.Plan(decode_batch->inputs);
  cuda::DeviceBuffer<float> logits(batch * config.vocab_size);
  cuda::DeviceBuffer<int32_t> sampled(batch);
  std::vector<int32_t> tokens(batch);
  cudaStream_t stream = backend.stream();
  // One step as the engine would run it: the kernel, the greedy pick, the tokens to the host.
  auto step = [&] {
    decoder.Run(plan, logits.data(), stream);
    cuda::ArgmaxRows(logits.data(), batch, config.vocab_size, sampled.data(), stream);
    MKSERVE_CUDA_CHECK(cudaMemcpyAsync(tokens.data(), sampled.data(), batch * sizeof(int32_t),
                                       cudaMemcpyDeviceToHost, stream));
    MKSERVE_CUDA_CHECK(cudaStreamSynchronize(stream));
  };
  for (int i = 0; i < warmup_steps; ++i) step();
  std::vector<double> wall_ms, kernel_ms;
  for (int i = 0; i < std::max(1, timed_steps); ++i) {
    const auto start = std::chrono::steady_clock::now();
    step();
    wall_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    kernel_ms.push_back(decoder.last_step_ms());
  }
  MegakernelPoint point;
  cuda::DecodePoint& d = point.decode;
  d.path = "megakernel";
  d.batch = batch;
  d.context_tokens = context_tokens;
  d.step_ms = Median(wall_ms);
  d.tokens_per_second = batch / (d.step_ms / 1e3);
  d.distinct_experts = distinct_experts;
  d.bytes_per_step = cuda::DecodeStepBytes(config, batch, context_tokens, distinct_experts);
  d.sol_tokens_per_second = batch / (d.bytes_per_step / read_bytes_per_second);
  d.percent_of_sol = 100.0 * d.tokens_per_second / d.sol_tokens_per_second;
  point.kernel_ms = Median(kernel_ms);
  return point;
}

}  // namespace mkserve::megakernel
