// The /metrics page: request outcomes, token counters and latency histograms recorded by the
// handlers, plus engine gauges read from an engine snapshot at scrape time. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "server/histogram.h"

namespace mkserve::server {

// Engine state at scrape time (filled from Engine::Snapshot by the handler).
struct EngineGauges {
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks_total = 0;
  double prefix_cache_hit_rate = 0.0;  // hit tokens / looked-up prompt tokens, 0..1
  int64_t batch_size = 0;              // sequences in the last step
};

// How a request ended, the `outcome` label of mkserve_requests_total.
enum class RequestOutcome { kStop, kLength, kToolCalls, kAborted, kError };

const char* OutcomeName(RequestOutcome outcome);

class ServerMetrics {
 public:
  ServerMetrics();

  void RecordRequest(RequestOutcome outcome);
  void AddTokens(int64_t prompt_tokens, int64_t generated_tokens);
  void ObserveTimeToFirstToken(double seconds);
  void ObserveInterTokenLatency(double seconds);

  // Prometheus text exposition format 0.0.4.
  std::string Render(const EngineGauges& gauges) const;

 private:
  mutable std::mutex mutex_;
  std::map<RequestOutcome, int64_t> requests_;
  int64_t prompt_tokens_ = 0;
  int64_t generated_tokens_ = 0;
  Histogram time_to_first_token_;
  Histogram inter_token_latency_;
};

}  // namespace mkserve::server
