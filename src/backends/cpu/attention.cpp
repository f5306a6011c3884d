#include "backends/cpu/attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

#include "backends/cpu/linear.h"

namespace mkserve::cpu {
namespace {

void WriteChunk(const AttentionChunk& chunk, int64_t kv_width, std::span<const float> k,
                std::span<const float> v, KvCache& cache) {
  for (int64_t t = 0; t < chunk.num_tokens; ++t) {
    int64_t position = chunk.start_position + t;
    int32_t block = cache.BlockOf(chunk.layer, chunk.block_table, position);
    int64_t offset = position % kBlockTokens;
    std::ranges::copy(k.subspan(t * kv_width, kv_width),
                      cache.Key(chunk.layer, block, offset).begin());
    std::ranges::copy(v.subspan(t * kv_width, kv_width),
                      cache.Value(chunk.layer, block, offset).begin());
  }
}

struct HeadQuery {
  std::span<const float> query;  // head_dim values
  int64_t position = 0;
  int64_t kv_head = 0;
  std::span<float> out;  // head_dim values
};

// softmax(q . k_j * scale) . v_j over keys j in [first, position].
void AttendOneHead(const ModelConfig& config, const LayerSpec& spec, const AttentionChunk& chunk,
                   const HeadQuery& head, KvCache& cache) {
  const int64_t head_dim = config.head_dim;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  const int64_t first = FirstAttendedPosition(spec, head.position);
  std::vector<float> scores;
  scores.reserve(head.position - first + 1);
  for (int64_t key = first; key <= head.position; ++key) {
    int32_t block = cache.BlockOf(chunk.layer, chunk.block_table, key);
    std::span<const float> keys = cache.Key(chunk.layer, block, key % kBlockTokens);
    scores.push_back(Dot(head.query, keys.subspan(head.kv_head * head_dim, head_dim)) * scale);
  }
  float max_score = *std::ranges::max_element(scores);
  float sum = 0.0f;
  for (float& score : scores) {
    score = std::exp(score - max_score);
    sum += score;
  }
  std::ranges::fill(head.out, 0.0f);
  for (int64_t key = first; key <= head.position; ++key) {
    int32_t block = cache.BlockOf(chunk.layer, chunk.block_table, key);
    std::span<const float> values = cache.Value(chunk.layer, block, key % kBlockTokens);
    float weight = scores[key - first] / sum;
    for (int64_t d = 0; d < head_dim; ++d) {
      head.out[d] += weight * values[head.kv_head * head_dim + d];
    }
  }
}

}  // namespace

int64_t FirstAttendedPosition(const LayerSpec& spec, int64_t position) {
  bool windowed = spec.attention == AttentionKind::kSliding && spec.window_tokens > 0;
  return windowed ? FirstKeyInWindow(position, spec.window_tokens) : 0;
}

void PagedAttention(const ModelConfig& config, const LayerSpec& spec, const AttentionChunk& chunk,
                    std::span<const float> q, std::span<const float> k, std::span<const float> v,
                    KvCache& cache, std::span<float> out, ThreadPool& pool) {
  const int64_t head_dim = config.head_dim;
  const int64_t q_width = config.q_width();
  const int64_t heads_per_kv_head = config.num_heads / config.num_kv_heads;
  assert(static_cast<int64_t>(q.size()) == chunk.num_tokens * q_width);
  WriteChunk(chunk, config.kv_width(), k, v, cache);
  // Every (token, head) pair is independent once the chunk's K/V are in the cache.
  pool.ParallelFor(chunk.num_tokens * config.num_heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      int64_t t = item / config.num_heads;
      int64_t h = item % config.num_heads;
      HeadQuery head{q.subspan(t * q_width + h * head_dim, head_dim), chunk.start_position + t,
                     h / heads_per_kv_head, out.subspan(t * q_width + h * head_dim, head_dim)};
      AttendOneHead(config, spec, chunk, head, cache);
    }
  });
}

}  // namespace mkserve::cpu
