// EngineSnapshot: the engine's numbers for /metrics, copied out after every step.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mkserve {

// A Prometheus-style histogram: counts[i] observations <= upper_bounds[i] (not cumulative);
// counts.back() is the +Inf bucket.
struct Histogram {
  std::vector<double> upper_bounds;
  std::vector<uint64_t> counts;
  double sum = 0.0;
  uint64_t count = 0;

  explicit Histogram(std::vector<double> bounds = {});
  void Observe(double value);
};

// Bucket bounds in seconds for latency histograms (1 ms .. 60 s).
std::vector<double> LatencyBucketsSeconds();
// Bucket bounds for batch sizes (1 .. 512).
std::vector<double> BatchSizeBuckets();

// What an engine step held: only decode rows, only prompt chunks, or both (a mixed step, which the
// CUDA backend runs as two sub-steps).
enum class StepKind { kDecode, kPrefill, kMixed };
inline constexpr int kNumStepKinds = 3;
const char* StepKindName(StepKind kind);

// Where the time of one kind of step goes: the whole step (schedule, backend, postprocess) and
// the backend's share, so that host overhead is the difference.
struct StepKindStats {
  Histogram duration_s{LatencyBucketsSeconds()};
  double backend_seconds = 0.0;
  int64_t prefill_tokens = 0;  // prompt (and recomputed) tokens in steps of this kind
  int64_t decode_rows = 0;     // decode rows in steps of this kind
};

struct KvGroupUsage {
  int64_t used_blocks = 0;  // referenced by sequences (cached-but-idle blocks count as free)
  int64_t total_blocks = 0;
};

struct EngineSnapshot {
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  std::vector<KvGroupUsage> kv_groups;  // KvLayout order
  int64_t prefix_cache_query_tokens = 0;
  int64_t prefix_cache_hit_tokens = 0;
  int64_t last_batch_size = 0;    // sequences in the last step
  int64_t last_batch_tokens = 0;  // tokens computed in the last step

  Histogram time_to_first_token_s{LatencyBucketsSeconds()};
  Histogram inter_token_latency_s{LatencyBucketsSeconds()};
  Histogram batch_size{BatchSizeBuckets()};

  // Requests by outcome (a request with n > 1 counts once, by its last sibling's reason).
  int64_t requests_stop = 0;
  int64_t requests_length = 0;
  int64_t requests_cancelled = 0;
  int64_t requests_error = 0;     // backend failures and shutdown
  int64_t requests_rejected = 0;  // invalid or queue full
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int64_t preemptions_total = 0;
  int64_t steps_total = 0;
  // Decode lookahead: steps started before the previous step's tokens were read, and those
  // dropped because a row of theirs had finished meanwhile (their work is lost).
  int64_t steps_ahead_total = 0;
  int64_t steps_ahead_dropped_total = 0;
  int64_t prompt_chunk_tokens_total = 0;                // prompt tokens computed beside the steps
  StepKindStats steps[kNumStepKinds];                   // indexed by StepKind
  std::map<std::string, int64_t> decode_steps_by_path;  // StepOutputs::decode_path, when set
};

}  // namespace mkserve
