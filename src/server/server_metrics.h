// The /metrics page in Prometheus text format. The engine's snapshot supplies request outcomes,
// token counters, latency and batch-size histograms and the KV / queue gauges; the server adds
// its HTTP responses by status code (which includes requests refused before reaching the engine).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "engine/engine_stats.h"

namespace mkserve::server {

// HTTP responses by status code. Thread-safe.
class HttpCounters {
 public:
  void Record(int status);
  std::map<int, int64_t> Counts() const;

 private:
  mutable std::mutex mutex_;
  std::map<int, int64_t> counts_;
};

// The lines of one histogram series (cumulative `_bucket` lines, `_sum`, `_count`); `labels`
// ("kind=\"decode\"") go before `le`, or "" for none.
std::string RenderHistogramSeries(const std::string& name, const std::string& labels,
                                  const Histogram& histogram);
// One Prometheus histogram (cumulative `_bucket{le=...}` lines, `_sum`, `_count`).
std::string RenderHistogram(const std::string& name, const std::string& help,
                            const Histogram& histogram);

// The whole exposition: every metric with # HELP and # TYPE lines.
std::string RenderMetrics(const EngineSnapshot& engine, const std::map<int, int64_t>& http_counts);

// The stored /v1/responses results' gauges (ResponseStore): how many, their bytes, the bound.
std::string RenderResponseStore(int64_t responses, int64_t bytes, int64_t capacity_bytes,
                                int64_t background_running);

}  // namespace mkserve::server
