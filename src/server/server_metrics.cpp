#include "server/server_metrics.h"

#include <sstream>

namespace mkserve::server {
namespace {

constexpr RequestOutcome kOutcomes[] = {RequestOutcome::kStop, RequestOutcome::kLength,
                                        RequestOutcome::kToolCalls, RequestOutcome::kAborted,
                                        RequestOutcome::kError};

template <typename Value>
void Metric(std::ostringstream& out, const std::string& name, const char* type,
            const std::string& help, Value value) {
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
      << name << " " << value << "\n";
}

}  // namespace

const char* OutcomeName(RequestOutcome outcome) {
  switch (outcome) {
    case RequestOutcome::kStop:
      return "stop";
    case RequestOutcome::kLength:
      return "length";
    case RequestOutcome::kToolCalls:
      return "tool_calls";
    case RequestOutcome::kAborted:
      return "aborted";
    case RequestOutcome::kError:
      return "error";
  }
  return "error";
}

// Buckets in seconds: TTFT spans queueing and prefill; ITL is one decode step.
ServerMetrics::ServerMetrics()
    : time_to_first_token_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      inter_token_latency_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}) {}

void ServerMetrics::RecordRequest(RequestOutcome outcome) {
  std::lock_guard lock(mutex_);
  ++requests_[outcome];
}

void ServerMetrics::AddTokens(int64_t prompt_tokens, int64_t generated_tokens) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += prompt_tokens;
  generated_tokens_ += generated_tokens;
}

void ServerMetrics::ObserveTimeToFirstToken(double seconds) {
  std::lock_guard lock(mutex_);
  time_to_first_token_.Observe(seconds);
}

void ServerMetrics::ObserveInterTokenLatency(double seconds) {
  std::lock_guard lock(mutex_);
  inter_token_latency_.Observe(seconds);
}

std::string ServerMetrics::Render(const EngineGauges& gauges) const {
  std::lock_guard lock(mutex_);
  std::ostringstream out;
  out << "# HELP mkserve_requests_total Finished requests by outcome.\n"
      << "# TYPE mkserve_requests_total counter\n";
  for (RequestOutcome outcome : kOutcomes) {
    auto it = requests_.find(outcome);
    out << "mkserve_requests_total{outcome=\"" << OutcomeName(outcome) << "\"} "
        << (it == requests_.end() ? 0 : it->second) << "\n";
  }
  Metric(out, "mkserve_prompt_tokens_total", "counter", "Prompt tokens processed.", prompt_tokens_);
  Metric(out, "mkserve_generation_tokens_total", "counter", "Tokens generated.", generated_tokens_);
  out << time_to_first_token_.Render("mkserve_time_to_first_token_seconds",
                                     "Time from request arrival to the first generated token.");
  out << inter_token_latency_.Render("mkserve_inter_token_latency_seconds",
                                     "Time between consecutive generated tokens of a request.");
  Metric(out, "mkserve_num_requests_running", "gauge", "Requests in the running batch.",
         gauges.num_running);
  Metric(out, "mkserve_num_requests_waiting", "gauge", "Requests waiting to be scheduled.",
         gauges.num_waiting);
  Metric(out, "mkserve_kv_blocks_used", "gauge", "KV cache blocks in use.", gauges.kv_blocks_used);
  Metric(out, "mkserve_kv_blocks_total", "gauge", "KV cache blocks in all pools.",
         gauges.kv_blocks_total);
  Metric(out, "mkserve_prefix_cache_hit_rate", "gauge",
         "Fraction of looked-up prompt tokens found in the prefix cache.",
         gauges.prefix_cache_hit_rate);
  Metric(out, "mkserve_batch_size", "gauge", "Sequences in the last engine step.",
         gauges.batch_size);
  return out.str();
}

}  // namespace mkserve::server
