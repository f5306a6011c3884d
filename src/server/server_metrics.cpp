#include "server/server_metrics.h"

#include <sstream>

namespace mkserve::server {
namespace {

void Header(std::ostringstream& out, const std::string& name, const char* type,
            const std::string& help) {
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
}

template <typename Value>
void Metric(std::ostringstream& out, const std::string& name, const char* type,
            const std::string& help, Value value) {
  Header(out, name, type, help);
  out << name << " " << value << "\n";
}

void RenderOutcomes(std::ostringstream& out, const EngineSnapshot& engine) {
  const std::string name = "mkserve_requests_total";
  Header(out, name, "counter", "Finished requests by outcome.");
  const std::pair<const char*, int64_t> outcomes[] = {{"stop", engine.requests_stop},
                                                      {"length", engine.requests_length},
                                                      {"cancelled", engine.requests_cancelled},
                                                      {"error", engine.requests_error},
                                                      {"rejected", engine.requests_rejected}};
  for (const auto& [outcome, count] : outcomes) {
    out << name << "{outcome=\"" << outcome << "\"} " << count << "\n";
  }
}

void RenderKv(std::ostringstream& out, const EngineSnapshot& engine) {
  int64_t used = 0, total = 0;
  for (const KvGroupUsage& group : engine.kv_groups) {
    used += group.used_blocks;
    total += group.total_blocks;
  }
  Metric(out, "mkserve_kv_blocks_used", "gauge", "KV cache blocks held by requests (all groups).",
         used);
  Metric(out, "mkserve_kv_blocks_total", "gauge", "KV cache blocks in all groups.", total);
  double hit_rate =
      engine.prefix_cache_query_tokens == 0
          ? 0.0
          : double(engine.prefix_cache_hit_tokens) / double(engine.prefix_cache_query_tokens);
  Metric(out, "mkserve_prefix_cache_hit_rate", "gauge",
         "Prompt tokens found in the prefix cache / prompt tokens looked up.", hit_rate);
}

// Step time by kind: a histogram of whole steps plus the backend's share and what the steps held,
// so an operator can see host overhead and what mixed steps cost.
void RenderSteps(std::ostringstream& out, const EngineSnapshot& engine) {
  const std::string name = "mkserve_step_duration_seconds";
  Header(out, name, "histogram", "Engine step time (schedule, backend, postprocess) by kind.");
  for (int k = 0; k < kNumStepKinds; ++k) {
    const std::string kind = std::string("kind=\"") + StepKindName(StepKind(k)) + "\"";
    out << RenderHistogramSeries(name, kind, engine.steps[k].duration_s);
  }
  auto per_kind = [&](const std::string& counter, const std::string& help, auto value) {
    Header(out, counter, "counter", help);
    for (int k = 0; k < kNumStepKinds; ++k) {
      out << counter << "{kind=\"" << StepKindName(StepKind(k)) << "\"} " << value(engine.steps[k])
          << "\n";
    }
  };
  per_kind("mkserve_step_backend_seconds_total", "Seconds the backend spent in steps, by kind.",
           [](const StepKindStats& s) { return s.backend_seconds; });
  per_kind("mkserve_step_prefill_tokens_total", "Prompt and recomputed tokens, by step kind.",
           [](const StepKindStats& s) { return s.prefill_tokens; });
  per_kind("mkserve_step_decode_rows_total", "Decode rows, by step kind.",
           [](const StepKindStats& s) { return s.decode_rows; });
  const std::string paths = "mkserve_decode_steps_total";
  Header(out, paths, "counter", "Steps whose decode rows ran through each decode path (CUDA).");
  for (const auto& [path, count] : engine.decode_steps_by_path) {
    out << paths << "{path=\"" << path << "\"} " << count << "\n";
  }
}

}  // namespace

void HttpCounters::Record(int status) {
  std::lock_guard lock(mutex_);
  ++counts_[status];
}

std::map<int, int64_t> HttpCounters::Counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

std::string RenderHistogramSeries(const std::string& name, const std::string& labels,
                                  const Histogram& histogram) {
  std::ostringstream out;
  out.precision(12);
  const std::string prefix = labels.empty() ? "" : labels + ",";
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < histogram.upper_bounds.size(); ++i) {
    cumulative += i < histogram.counts.size() ? histogram.counts[i] : 0;
    out << name << "_bucket{" << prefix << "le=\"" << histogram.upper_bounds[i] << "\"} "
        << cumulative << "\n";
  }
  out << name << "_bucket{" << prefix << "le=\"+Inf\"} " << histogram.count << "\n";
  out << name << "_sum" << braces << " " << histogram.sum << "\n";
  out << name << "_count" << braces << " " << histogram.count << "\n";
  return out.str();
}

std::string RenderHistogram(const std::string& name, const std::string& help,
                            const Histogram& histogram) {
  std::ostringstream out;
  Header(out, name, "histogram", help);
  return out.str() + RenderHistogramSeries(name, "", histogram);
}

std::string RenderMetrics(const EngineSnapshot& engine, const std::map<int, int64_t>& http_counts) {
  std::ostringstream out;
  RenderOutcomes(out, engine);
  Header(out, "mkserve_http_responses_total", "counter", "HTTP responses by status code.");
  for (const auto& [status, count] : http_counts) {
    out << "mkserve_http_responses_total{code=\"" << status << "\"} " << count << "\n";
  }
  Metric(out, "mkserve_prompt_tokens_total", "counter", "Prompt tokens processed.",
         engine.prompt_tokens_total);
  Metric(out, "mkserve_prompt_chunk_tokens_total", "counter",
         "Prompt tokens computed in chunks beside the steps (while other streams decode).",
         engine.prompt_chunk_tokens_total);
  Metric(out, "mkserve_generation_tokens_total", "counter", "Tokens generated.",
         engine.generation_tokens_total);
  Metric(out, "mkserve_preemptions_total", "counter", "Sequences preempted for KV memory.",
         engine.preemptions_total);
  Metric(out, "mkserve_steps_ahead_total", "counter",
         "Decode steps started before the previous step's tokens were read.",
         engine.steps_ahead_total);
  Metric(out, "mkserve_steps_ahead_dropped_total", "counter",
         "Steps started ahead and dropped: a row of theirs had finished meanwhile.",
         engine.steps_ahead_dropped_total);
  out << RenderHistogram("mkserve_time_to_first_token_seconds",
                         "Time from arrival to the first generated token.",
                         engine.time_to_first_token_s);
  out << RenderHistogram("mkserve_inter_token_latency_seconds",
                         "Time between consecutive tokens of a request.",
                         engine.inter_token_latency_s);
  out << RenderHistogram("mkserve_batch_size", "Sequences per engine step.", engine.batch_size);
  Metric(out, "mkserve_num_requests_running", "gauge", "Requests in the running batch.",
         engine.num_running);
  Metric(out, "mkserve_num_requests_waiting", "gauge", "Requests waiting to be scheduled.",
         engine.num_waiting);
  Metric(out, "mkserve_last_batch_size", "gauge", "Sequences in the last engine step.",
         engine.last_batch_size);
  RenderKv(out, engine);
  RenderSteps(out, engine);
  return out.str();
}

std::string RenderResponseStore(int64_t responses, int64_t bytes, int64_t capacity_bytes,
                                int64_t background_running) {
  std::ostringstream out;
  Metric(out, "mkserve_response_store_responses", "gauge",
         "Stored /v1/responses results (previous_response_id, GET /v1/responses/{id}).", responses);
  Metric(out, "mkserve_response_store_bytes", "gauge", "JSON bytes of the stored responses.",
         bytes);
  Metric(out, "mkserve_response_store_capacity_bytes", "gauge",
         "--response-store-mb: beyond it the least recently used responses are dropped.",
         capacity_bytes);
  Metric(out, "mkserve_background_responses_running", "gauge",
         "/v1/responses sent with background: true that are still running.", background_running);
  return out.str();
}

}  // namespace mkserve::server
