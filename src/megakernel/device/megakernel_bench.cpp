#include "megakernel/device/megakernel_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <vector>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/device_buffer.h"
#include "megakernel/schedule/opcode_names.h"

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
  const cuda::StepPlan plan = cuda::BuildStepPlan(config, backend.kv_layout(), decode_batch->inputs,
                                                  backend.max_num_tokens());
  cuda::DeviceBuffer<float> logits(batch * config.vocab_size);
  cuda::DeviceBuffer<int32_t> sampled(batch);
  std::vector<int32_t> tokens(batch);
  cudaStream_t stream = backend.stream();
  // One step as the engine would run it: the kernel with the greedy pick, the tokens to the host.
  auto step = [&] {
    decoder.Run(plan, logits.data(), StepSampling{sampled.data()}, stream);
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

std::string TimelineBreakdown(const Schedule& schedule, std::span<const TaskTimestamp> records,
                              int64_t layer) {
  struct Stats {
    int64_t count = 0;
    double sum_us = 0, max_us = 0, wait_us = 0;
    uint64_t first_start = std::numeric_limits<uint64_t>::max(), last_end = 0;
  };
  std::vector<Stats> all(kOpcodeCount), in_layer(kOpcodeCount);
  // The layer starts when its input is ready: its QKV tasks' first wait that ends (after the
  // previous join, or with the fused norm after the previous O-proj and FFN).
  uint64_t step_start = std::numeric_limits<uint64_t>::max(), step_end = 0;
  uint64_t layer_origin = std::numeric_limits<uint64_t>::max();
  const int64_t width = schedule.max_tasks_per_sm();
  for (size_t sm = 0; sm < schedule.sm_tasks.size(); ++sm) {
    for (size_t i = 0; i < schedule.sm_tasks[sm].size(); ++i) {
      const TaskDescriptor& task = schedule.sm_tasks[sm][i];
      const TaskTimestamp& t = records[sm * width + i];
      const double us = (t.end_ns - t.start_ns) / 1e3;
      Stats& a = all[task.opcode];
      ++a.count;
      a.sum_us += us;
      a.max_us = std::max(a.max_us, us);
      a.wait_us += (t.ready_ns - t.start_ns) / 1e3;
      step_start = std::min(step_start, t.start_ns);
      step_end = std::max(step_end, t.end_ns);
      if (task.opcode == kQkv && static_cast<int64_t>(task.layer) == layer) {
        layer_origin = std::min(layer_origin, t.ready_ns);
      }
      if (static_cast<int64_t>(task.layer) == layer) {
        Stats& l = in_layer[task.opcode];
        l.first_start = std::min(l.first_start, t.start_ns);
        l.last_end = std::max(l.last_end, t.end_ns);
      }
    }
  }
  std::string out;
  char line[200];
  std::snprintf(line, sizeof(line),
                "step span %.1f us; layer %lld from when its input was ready:\n",
                (step_end - step_start) / 1e3, static_cast<long long>(layer));
  out += line;
  out +=
      "| opcode | tasks | mean us | mean wait us | max us | layer: first start us | layer: last "
      "end us |\n";
  for (uint32_t op = 0; op < kOpcodeCount; ++op) {
    const Stats& a = all[op];
    if (a.count == 0) continue;
    const Stats& l = in_layer[op];
    const bool here = l.last_end > 0;
    std::snprintf(line, sizeof(line), "| %s | %lld | %.2f | %.2f | %.2f | %.1f | %.1f |\n",
                  std::string(OpcodeName(op)).c_str(), static_cast<long long>(a.count),
                  a.sum_us / a.count, a.wait_us / a.count, a.max_us,
                  here ? (static_cast<double>(l.first_start) - layer_origin) / 1e3 : 0.0,
                  here ? (static_cast<double>(l.last_end) - layer_origin) / 1e3 : 0.0);
    out += line;
  }
  return out;
}

}  // namespace mkserve::megakernel
