// megakernel_bench: the megakernel's decode step next to the layered path's (CUDA graphs on), at
// batch 1, 8, 32 and 64 with an 8K context,
// random North Mini Code weights and a random KV cache. Prints one markdown table, then where the
// time of one recorded step went. Usage: megakernel_bench [layers] [context_tokens]
// [policy.json...]: with policy files (SchedulePolicy::FromJson), one megakernel row per policy
// and batch, so wave orders and placements are compared in one run. MEGAKERNEL_BENCH_BATCHES
// (comma-separated, e.g. "1") picks the batch sizes, to profile one alone under ncu;
// MEGAKERNEL_BENCH_TRACE=DIR writes every recorded step as CSV (scripts/megakernel_timeline.py).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <memory>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/tools/decode_bench.h"
#include "backends/cuda/tools/read_bandwidth.h"
#include "common/error.h"
#include "megakernel/device/megakernel_bench.h"
#include "megakernel/schedule/timeline.h"
#include "model/presets.h"

int main(int argc, char** argv) {
  using namespace mkserve;
  const int64_t layers = argc > 1 ? std::atoll(argv[1]) : kNorthNumLayers;
  const int64_t context = argc > 2 ? std::atoll(argv[2]) : 8192;
  try {
    ModelConfig config = NmcPreset(layers);
    cuda::DeviceWeights weights = cuda::DeviceWeights::Random(config, 1);
    cuda::CudaBackendOptions options;
    options.max_batch = 64;
    options.max_num_tokens = 64;
    options.decode_path = "layered";  // graphs where they apply, as served
    auto backend =
        std::make_unique<cuda::CudaBackend>(std::move(config), std::move(weights), options);
    backend->kv_pool().FillRandom(3, 0.01f);
    const double read = cuda::MeasureReadBandwidth(int64_t{4} << 30, 5).bytes_per_second;
    std::vector<std::pair<std::string, megakernel::SchedulePolicy>> policies;
    for (int i = 3; i < argc; ++i) {
      policies.emplace_back(argv[i], megakernel::SchedulePolicy::FromFile(argv[i]));
    }
    if (policies.empty()) policies.emplace_back("default", megakernel::SchedulePolicy::Default());
    const megakernel::ProjectionPanels panels(backend->config(), backend->weights());
    std::vector<std::unique_ptr<megakernel::MegakernelDecoder>> decoders;
    for (const auto& [name, policy] : policies) {
      megakernel::MegakernelDecoderOptions mk_options;
      mk_options.policy = policy;
      decoders.push_back(std::make_unique<megakernel::MegakernelDecoder>(
          backend->config(), backend->weights(), panels, backend->kv_pool(), mk_options));
    }
    std::printf(
        "| policy | batch | context | layered ms | layered tok/s | megakernel ms | kernel ms | "
        "megakernel tok/s | speedup | %% SoL |\n|---|---|---|---|---|---|---|---|---|---|\n");
    std::vector<int64_t> batches = {1, 8, 32, 64};
    if (const char* list = std::getenv("MEGAKERNEL_BENCH_BATCHES")) {
      const Error bad("MEGAKERNEL_BENCH_BATCHES: expected comma-separated batch sizes 1.." +
                      std::to_string(megakernel::kMaxMegakernelBatch) + ", got \"" + list + "\"");
      batches.clear();
      for (const char* at = list; *at != '\0';) {
        char* end = nullptr;
        const long long batch = std::strtoll(at, &end, 10);
        if (end == at || batch < 1 || batch > megakernel::kMaxMegakernelBatch) throw bad;
        batches.push_back(batch);
        at = *end == ',' ? end + 1 : end;
      }
      if (batches.empty()) throw bad;
    }
    for (int64_t batch : batches) {
      const cuda::DecodePoint layered = cuda::BenchDecode(*backend, batch, context, 3, 10, read);
      for (size_t p = 0; p < policies.size(); ++p) {
        const megakernel::MegakernelPoint mk = megakernel::BenchMegakernelDecode(
            *backend, *decoders[p], batch, context, 3, 10, read, layered.distinct_experts);
        std::printf("| %s | %lld | %lld | %.3f | %.0f | %.3f | %.3f | %.0f | %.2fx | %.1f |\n",
                    policies[p].first.c_str(), static_cast<long long>(batch),
                    static_cast<long long>(context), layered.step_ms, layered.tokens_per_second,
                    mk.decode.step_ms, mk.kernel_ms, mk.decode.tokens_per_second,
                    mk.decode.tokens_per_second / layered.tokens_per_second,
                    mk.decode.percent_of_sol);
      }
    }
    // Where the time goes: one recorded step per policy and batch size (the first and the last).
    // MEGAKERNEL_BENCH_TRACE=DIR also writes each as DIR/trace_p<policy>_b<batch>.csv.
    const char* trace_dir = std::getenv("MEGAKERNEL_BENCH_TRACE");
    std::vector<int64_t> traced_batches = {batches.front()};
    if (batches.back() != batches.front()) traced_batches.push_back(batches.back());
    for (size_t p = 0; p < policies.size(); ++p) {
      megakernel::MegakernelDecoderOptions traced;
      traced.record_timeline = true;
      traced.policy = policies[p].second;
      megakernel::MegakernelDecoder recorder(backend->config(), backend->weights(), panels,
                                             backend->kv_pool(), traced);
      for (int64_t batch : traced_batches) {
        megakernel::BenchMegakernelDecode(*backend, recorder, batch, context, 1, 1, read, 0);
        const std::vector<megakernel::TaskTimestamp> records = recorder.LastTimeline();
        std::printf("\n%s, batch %lld, %s", policies[p].first.c_str(),
                    static_cast<long long>(batch),
                    megakernel::TimelineBreakdown(*recorder.last_schedule(), records,
                                                  std::min<int64_t>(10, layers - 1))
                        .c_str());
        if (trace_dir == nullptr) continue;
        const std::string path = std::string(trace_dir) + "/trace_p" + std::to_string(p) + "_b" +
                                 std::to_string(batch) + ".csv";
        std::ofstream file(path);
        file << megakernel::TimelineToCsv(*recorder.last_schedule(), records,
                                          recorder.LastItemTimeline());
        if (!file) throw Error("MEGAKERNEL_BENCH_TRACE: cannot write " + path);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "megakernel_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
