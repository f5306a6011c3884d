// Each megakernel op alone (or a short chain joined by counters) against a CPU reference on
// random inputs, outputs poisoned with NaN beforehand so an unwritten element fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/gpu_test_util.h"
#include "megakernel/device/op_harness.h"

namespace mkserve::megakernel::testing {
namespace {

using cuda::testing::ExpectClose;
using cuda::testing::RoundBf16;
using cuda::testing::ToHost;
using cuda::testing::ToHostFloat;
using M = TinyModel;

// Tasks in global order, placed round-robin over the SMs (the schedule builder's default).
std::vector<std::vector<TaskDescriptor>> RoundRobin(const std::vector<TaskDescriptor>& order) {
  std::vector<std::vector<TaskDescriptor>> lists(MegakernelGridSize());
  for (size_t i = 0; i < order.size(); ++i) lists[i % lists.size()].push_back(order[i]);
  return lists;
}

std::vector<float> RmsNorm(const std::vector<float>& x, const std::vector<float>& gamma,
                           float eps) {
  double squares = 0;
  for (float v : x) squares += static_cast<double>(v) * v;
  const float inv = 1.0f / std::sqrt(static_cast<float>(squares / x.size()) + eps);
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * gamma[i];
  return y;
}

// LM head tiles of `width` vocabulary rows for `rows` token rows, placed round-robin or all on
// SM 0 (one tile after another through the same weight ring). Up to 8 rows a tile takes the GEMM
// body's ring path (K split over the warps when the tile has fewer than 8 warps' worth of
// pairs); 11 rows take its register path in two staging passes.
void ExpectLmHeadTilesMatchCpu(int rows, uint32_t width, bool one_sm) {
  M m;
  const std::vector<float> x = RandomBf16Values(int64_t{M::kBatch} * M::kHidden, 11);
  m.p.x_norm = m.Bf16(x);
  m.p.tiles.lm_head = static_cast<int>(width);
  std::vector<TaskDescriptor> order;
  for (uint32_t tile = 0; tile < M::kVocab / width; ++tile) {
    TaskDescriptor t = Task(kLmHead, 1);
    t.tile = tile;
    t.k_end = M::kHidden;
    t.row_begin = 0;
    t.row_end = static_cast<uint32_t>(rows);
    order.push_back(t);
  }
  std::vector<std::vector<TaskDescriptor>> lists = RoundRobin(order);
  if (one_sm) {
    for (auto& list : lists) list.clear();
    lists[0] = order;
  }
  RunLists(m.p, lists);
  std::vector<float> got = ToHost(m.floats[m.floats.size() - 1]);
  const std::string what = "logits, " + std::to_string(rows) + " rows, tiles of " +
                           std::to_string(width) + (one_sm ? " on one SM" : "");
  for (size_t i = static_cast<size_t>(rows) * M::kVocab; i < got.size(); ++i) {
    ASSERT_TRUE(std::isnan(got[i])) << what << ": a row past the tile's rows was written";
  }
  got.resize(static_cast<size_t>(rows) * M::kVocab);
  std::vector<float> want(static_cast<size_t>(rows) * M::kVocab);
  for (int r = 0; r < rows; ++r) {
    for (int v = 0; v < M::kVocab; ++v) {
      double dot = 0;
      for (int k = 0; k < M::kHidden; ++k)
        dot += x[r * M::kHidden + k] * m.embed[v * M::kHidden + k];
      want[r * M::kVocab + v] = static_cast<float>(dot) * m.p.logit_scale;
    }
  }
  ExpectClose(got, want, 1e-3f, 1e-3f, what.c_str());
}

TEST(MegakernelOps, LmHeadTilesMatchCpu) {
  cuda::testing::RequireGpu();
  ExpectLmHeadTilesMatchCpu(M::kBatch, 64, false);  // the GEMM body's register path
  for (int rows : {1, 5, 8}) {
    for (uint32_t width : {16u, 64u, 128u}) {
      ExpectLmHeadTilesMatchCpu(rows, width, false);
      ExpectLmHeadTilesMatchCpu(rows, width, true);
    }
  }
}

TEST(MegakernelOps, EmbedThenJoinAcrossSmsMatchCpu) {
  cuda::testing::RequireGpu();
  M m;
  std::vector<int32_t> tokens(M::kBatch);
  for (int r = 0; r < M::kBatch; ++r) tokens[r] = (r * 389 + 17) % M::kVocab;
  DeviceBuffer<int32_t> token_ids = ToDevice(tokens);
  m.p.token_ids = token_ids.data();
  const std::vector<float> attn = cuda::testing::RandomFloats(int64_t{M::kBatch} * M::kHidden, 12);
  const std::vector<float> ffn = cuda::testing::RandomFloats(int64_t{M::kBatch} * M::kHidden, 13);
  m.floats.push_back(ToDevice(attn));
  m.p.attn_out = m.floats.back().data();
  m.floats.push_back(ToDevice(ffn));
  m.p.ffn_out = m.floats.back().data();
  DeviceBuffer<uint32_t> counters = ToDevice(std::vector<uint32_t>(1, 0));
  m.p.counters = counters.data();
  std::vector<TaskDescriptor> order;
  const int groups = (M::kBatch + 2) / 3;  // three rows per task
  for (int g = 0; g < groups; ++g) {
    TaskDescriptor t = Task(kEmbed);
    t.row_begin = 3 * g;
    t.row_end = std::min(M::kBatch, 3 * g + 3);
    t.signal_counter = 0;
    order.push_back(t);
  }
  for (int g = 0; g < groups; ++g) {
    TaskDescriptor t = Task(kJoin);
    t.row_begin = 3 * g;
    t.row_end = std::min(M::kBatch, 3 * g + 3);
    t.wait0_counter = 0;
    t.wait0_target = groups;  // every embedding first: the join reads only its rows, but waits all
    t.flags = kFlagFinalNorm;
    order.push_back(t);
  }
  RunLists(m.p, RoundRobin(order));
  std::vector<float> residual_want, norm_want;
  for (int r = 0; r < M::kBatch; ++r) {
    std::vector<float> x(M::kHidden);
    for (int i = 0; i < M::kHidden; ++i) {
      const int64_t at = int64_t{r} * M::kHidden + i;
      x[i] = m.embed[int64_t{tokens[r]} * M::kHidden + i] + attn[at] + ffn[at];
    }
    residual_want.insert(residual_want.end(), x.begin(), x.end());
    const std::vector<float> y = RmsNorm(x, m.norm_gamma, m.p.norm_eps);
    norm_want.insert(norm_want.end(), y.begin(), y.end());
  }
  // Layer 0's input (the embedding) stays in the first block, the join's sum goes to the second.
  const std::vector<float> residual = ToHost(m.floats[0]);
  std::vector<float> embedded;
  for (int r = 0; r < M::kBatch; ++r) {
    const auto row = m.embed.begin() + int64_t{tokens[r]} * M::kHidden;
    embedded.insert(embedded.end(), row, row + M::kHidden);
  }
  const auto half = residual.begin() + int64_t{M::kBatch} * M::kHidden;
  ExpectClose(std::vector<float>(residual.begin(), half), embedded, 0, 0, "residual of layer 0");
  ExpectClose(std::vector<float>(half, residual.end()), residual_want, 1e-5f, 1e-5f, "residual");
  ExpectClose(ToHost(m.floats[1]), norm_want, 1e-4f, 1e-4f, "x_norm_f32");
  ExpectClose(ToHostFloat(m.bf16s[m.bf16s.size() - 2]), norm_want, 1e-2f, 1e-2f, "x_norm");
}

// The fused norm: router tasks of layer 1 normalise layer 0's residual + attn_out + ffn_out
// themselves (tile 0 also writes x_norm), beside a residual-only join of layer 0. `primed`: the
// router tasks copy their weights before their wait (kFlagPrimeWeights).
void RunFusedNormRouter(bool primed) {
  cuda::testing::RequireGpu();
  M m;
  const int B = M::kBatch, H = M::kHidden, E = M::kExperts;
  const std::vector<float> r = cuda::testing::RandomFloats(int64_t{B} * H, 41);
  const std::vector<float> a = cuda::testing::RandomFloats(int64_t{B} * H, 42);
  const std::vector<float> f = cuda::testing::RandomFloats(int64_t{B} * H, 43);
  std::vector<float> residual = r;
  residual.resize(2 * r.size(), NAN);
  DeviceBuffer<float> residual_d = ToDevice(residual), attn_d = ToDevice(a), ffn_d = ToDevice(f);
  // Router logits: a block per layer; these tasks are layer 1's.
  DeviceBuffer<float> logits_d = ToDevice(std::vector<float>(2 * int64_t{B} * E, 0.0f));
  DeviceBuffer<bf16> x_norm_d = ToDeviceBf16(std::vector<float>(int64_t{B} * H, NAN));
  m.p.residual = residual_d.data();
  m.p.attn_out = attn_d.data();
  m.p.ffn_out = ffn_d.data();
  m.p.router_logits = logits_d.data();
  m.p.x_norm = x_norm_d.data();
  m.p.tiles.router = 8;
  std::vector<TaskDescriptor> order;
  TaskDescriptor join = Task(kJoin, 0);
  join.row_end = B;
  join.flags = kFlagResidualOnly;
  order.push_back(join);
  for (int tile = 0; tile < E / 8; ++tile) {
    for (int split = 0; split < 2; ++split) {
      TaskDescriptor t = Task(kRouter, 1);
      t.tile = tile;
      t.k_begin = split * H / 2;
      t.k_end = (split + 1) * H / 2;
      t.row_end = B;
      t.flags = kFlagAccumulate | kFlagFusedNorm | (primed ? kFlagPrimeWeights : 0u);
      order.push_back(t);
    }
  }
  RunLists(m.p, RoundRobin(order));
  std::vector<float> sum_want, norm_want, logits_want;
  for (int row = 0; row < B; ++row) {
    std::vector<float> x(H);
    for (int i = 0; i < H; ++i) {
      const int64_t at = int64_t{row} * H + i;
      x[i] = r[at] + a[at] + f[at];
    }
    sum_want.insert(sum_want.end(), x.begin(), x.end());
    const std::vector<float> y = RmsNorm(x, m.norm_gamma, m.p.norm_eps);
    norm_want.insert(norm_want.end(), y.begin(), y.end());
    for (int e = 0; e < E; ++e) {
      double dot = 0;
      for (int k = 0; k < H; ++k) dot += m.router[int64_t{e} * H + k] * y[k];
      logits_want.push_back(static_cast<float>(dot));
    }
  }
  const std::vector<float> written = ToHost(residual_d);
  ExpectClose(std::vector<float>(written.begin(), written.begin() + r.size()), r, 0, 0,
              "residual of layer 0");
  ExpectClose(std::vector<float>(written.begin() + r.size(), written.end()), sum_want, 1e-5f, 1e-5f,
              "residual of layer 1");
  ExpectClose(ToHostFloat(x_norm_d), norm_want, 1e-2f, 1e-2f, "x_norm");
  const std::vector<float> logits = ToHost(logits_d);
  ExpectClose(std::vector<float>(logits.begin() + int64_t{B} * E, logits.end()), logits_want, 1e-3f,
              1e-3f, "router logits");
}

TEST(MegakernelOps, FusedNormRouterAndResidualJoinMatchCpu) { RunFusedNormRouter(false); }
TEST(MegakernelOps, PrimedFusedNormRouterMatchesCpu) { RunFusedNormRouter(true); }

// A paged cache of one layer, three rows, a sliding window the rows' contexts cross.
struct AttentionCase {
  static constexpr int kRows = 3, kWindow = 100, kPages = 4;
  M m;
  std::vector<int32_t> positions = {70, 200, 130};
  std::vector<int32_t> tables;  // [row][kPages]
  std::vector<float> cache, q;
  DeviceBuffer<int32_t> positions_d, tables_d;
  DeviceBuffer<LayerParams> layer_d;

  AttentionCase() {
    const int64_t kv_width = M::kKvHeads * M::kHeadDim;
    const int blocks = kRows * kPages;
    std::vector<int32_t> order(blocks);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(5));
    tables = order;
    cache = RandomBf16Values(int64_t{blocks} * 64 * 2 * kv_width, 21);
    q = RandomBf16Values(int64_t{kRows} * M::kHeads * M::kHeadDim, 22);
    positions_d = ToDevice(positions);
    tables_d = ToDevice(tables);
    LayerParams layer = m.layer;
    layer.kv_cache = m.Bf16(cache);
    layer.block_tables = tables_d.data();
    layer.max_pages = kPages;
    layer_d = ToDevice(std::vector<LayerParams>{layer});
    m.p.layers = layer_d.data();
    m.p.batch = kRows;
    m.p.positions = positions_d.data();
    m.p.q = m.Bf16(q);
    m.p.attn_in = m.Bf16(std::vector<float>(q.size(), NAN));
    m.p.attn_partial = m.Floats(int64_t{kRows} * M::kHeads * m.p.max_splits * M::kHeadDim);
    m.p.attn_stats = m.Floats(int64_t{kRows} * M::kHeads * m.p.max_splits * 2);
  }

  float Cache(int row, int key, int kv, int kv_head, int d) const {
    const int64_t block = tables[row * kPages + key / 64];
    const int64_t kv_width = M::kKvHeads * M::kHeadDim;
    return cache[((block * 64 + key % 64) * 2 + kv) * kv_width + kv_head * M::kHeadDim + d];
  }

  std::vector<float> Reference() const {
    std::vector<float> out(q.size());
    for (int r = 0; r < kRows; ++r) {
      const int first = std::max(0, positions[r] - kWindow + 1);
      for (int h = 0; h < M::kHeads; ++h) {
        const int kvh = h / (M::kHeads / M::kKvHeads);
        const float* qh = q.data() + (r * M::kHeads + h) * M::kHeadDim;
        std::vector<double> scores;
        double top = -INFINITY;
        for (int key = first; key <= positions[r]; ++key) {
          double dot = 0;
          for (int d = 0; d < M::kHeadDim; ++d) dot += qh[d] * Cache(r, key, 0, kvh, d);
          scores.push_back(dot / std::sqrt(128.0));
          top = std::max(top, scores.back());
        }
        double sum = 0;
        for (double& s : scores) sum += (s = std::exp(s - top));
        for (int d = 0; d < M::kHeadDim; ++d) {
          double acc = 0;
          for (size_t j = 0; j < scores.size(); ++j) {
            acc += scores[j] * Cache(r, first + static_cast<int>(j), 1, kvh, d);
          }
          out[(r * M::kHeads + h) * M::kHeadDim + d] = static_cast<float>(acc / sum);
        }
      }
    }
    return out;
  }
};

// `combine`: the splits' partial states are merged by kAttentionCombine (with one split, the
// schedule may still do so: the split then writes both attn_in and its partial state).
void RunSlidingAttention(int splits, bool combine) {
  cuda::testing::RequireGpu();
  AttentionCase c;
  DeviceBuffer<uint32_t> counters =
      ToDevice(std::vector<uint32_t>(AttentionCase::kRows * M::kKvHeads, 0));
  c.m.p.counters = counters.data();
  std::vector<TaskDescriptor> order;
  for (int r = 0; r < AttentionCase::kRows; ++r) {
    for (int h = 0; h < M::kKvHeads; ++h) {
      for (int s = 0; s < splits; ++s) {
        TaskDescriptor t = Task(kAttention);
        t.row_begin = r;
        t.row_end = r + 1;
        t.split = s;
        t.arg[kArgKvHead] = h;
        t.arg[kArgWindow] = AttentionCase::kWindow;
        t.arg[kArgSplits] = splits;
        if (combine) t.signal_counter = r * M::kKvHeads + h;
        order.push_back(t);
      }
    }
  }
  if (combine) {
    for (int r = 0; r < AttentionCase::kRows; ++r) {
      for (int h = 0; h < M::kKvHeads; ++h) {
        TaskDescriptor t = Task(kAttentionCombine);
        t.row_begin = r;
        t.row_end = r + 1;
        t.wait0_counter = r * M::kKvHeads + h;
        t.wait0_target = splits;
        t.arg[kArgKvHead] = h;
        t.arg[kArgSplits] = splits;
        order.push_back(t);
      }
    }
  }
  RunLists(c.m.p, RoundRobin(order));
  ExpectClose(ToHostFloat(c.m.bf16s.back()), c.Reference(), 1e-2f, 1e-2f, "attn_in");
}

TEST(MegakernelOps, SlidingAttentionOneSplitWritesOutputDirectly) { RunSlidingAttention(1, false); }
TEST(MegakernelOps, SlidingAttentionOneSplitThenCombine) { RunSlidingAttention(1, true); }
TEST(MegakernelOps, SlidingAttentionThreeSplitsAndCombine) { RunSlidingAttention(3, true); }

// Router -> top-k -> finalize -> claimed expert gate/up and down -> combine, in one launch:
// `batch` rows routed to `top_k` of 16 experts, `rows_per_block` routed rows per expert item.
// `topk_in_claims`: router -> claims by pick that run the top-k themselves -> combine (no top-k
// task, no finalize; the bucket tables are the identity, as the decoder sets them). `planted`:
// every row's picks are published before the step, in reverse order, so no claim ranks: the ids
// come out in that order (the sum does not depend on it).
void RunMoeChain(int batch, int top_k, int rows_per_block, bool topk_in_claims = false,
                 bool planted = false) {
  cuda::testing::RequireGpu();
  M m(batch, top_k);
  if (topk_in_claims) rows_per_block = 1;
  const int B = batch, H = M::kHidden, E = M::kExperts, K = top_k, I = M::kExpertWidth;
  const std::vector<float> x = RandomBf16Values(int64_t{B} * H, 31);
  m.p.x_norm = m.Bf16(x);
  m.floats.push_back(ToDevice(x));
  m.p.x_norm_f32 = m.floats.back().data();
  m.p.tiles.router = 8;
  m.p.tiles.expert_up = 32;
  m.p.tiles.expert_down = 128;
  m.p.tiles.expert_rows = rows_per_block;
  const int up_tiles = I / 32, down_tiles = H / 128;
  const int blocks_per_expert = (B + rows_per_block - 1) / rows_per_block;
  const int used = std::min(E, B * K);
  const int max_blocks = used + (B * K - used) / rows_per_block;
  DeviceBuffer<ExpertWorkItem> items(2 * max_blocks * std::max(up_tiles, down_tiles));
  m.p.expert_items = items.data();
  DeviceBuffer<uint32_t> offsets =
      ToDevice(std::vector<uint32_t>{0, static_cast<uint32_t>(max_blocks * up_tiles)});
  DeviceBuffer<uint32_t> queue_counts = ToDevice(std::vector<uint32_t>(2, 12345));
  DeviceBuffer<uint32_t> queue_heads = ToDevice(std::vector<uint32_t>(2, 0));
  m.p.queue_offsets = offsets.data();
  m.p.queue_counts = queue_counts.data();
  m.p.queue_heads = queue_heads.data();
  const uint32_t router_done = 0, topk_done = 1, finalize_done = 2, up_done = 3;
  const uint32_t rows_done = up_done + (topk_in_claims ? B * top_k : E * blocks_per_expert);
  std::vector<int32_t> identity(B * top_k);
  std::iota(identity.begin(), identity.end(), 0);
  DeviceBuffer<int32_t> identity_d = ToDevice(identity);
  if (topk_in_claims) m.p.bucket_assignment = m.p.routed_position = identity_d.data();
  DeviceBuffer<uint32_t> counters = ToDevice(std::vector<uint32_t>(rows_done + B, 0));
  m.p.counters = counters.data();

  std::vector<TaskDescriptor> order;
  for (int tile = 0; tile < E / 8; ++tile) {
    for (int split = 0; split < 2; ++split) {
      TaskDescriptor t = Task(kRouter);
      t.tile = tile;
      t.k_begin = split * H / 2;
      t.k_end = (split + 1) * H / 2;
      t.row_end = B;
      t.flags = kFlagAccumulate;
      t.signal_counter = router_done;
      order.push_back(t);
    }
  }
  // What the claims wait for, and how they take their items.
  uint32_t items_ready = finalize_done, claim_flags = 0;
  if (topk_in_claims) {
    items_ready = router_done;
    claim_flags = kFlagPickItems | kFlagTopKInClaims;
  } else {
    const int topk_groups = (B + 3) / 4;
    for (int g = 0; g < topk_groups; ++g) {
      TaskDescriptor t = Task(kTopK);
      t.row_begin = 4 * g;
      t.row_end = std::min(B, 4 * g + 4);
      t.wait0_counter = router_done;
      t.wait0_target = 2 * E / 8;
      t.signal_counter = topk_done;
      order.push_back(t);
    }
    TaskDescriptor fin = Task(kMoeFinalize);
    fin.row_end = B;
    fin.wait0_counter = topk_done;
    fin.wait0_target = topk_groups;
    fin.signal_counter = finalize_done;
    fin.arg[kArgQueue] = 0;
    fin.arg[kArgQueue2] = 1;
    fin.arg[kArgTileRows] = rows_per_block;
    fin.arg[kArgTiles] = up_tiles;
    fin.arg[kArgTiles2] = down_tiles;
    order.push_back(fin);
  }
  const uint32_t ready_target = topk_in_claims ? 2 * E / 8 : 1;
  for (int c = 0; c < 6; ++c) {
    TaskDescriptor t = Task(kExpertGateUpClaim);
    t.row_end = B;
    t.wait0_counter = items_ready;
    t.wait0_target = ready_target;
    t.flags = claim_flags;
    t.arg[kArgQueue] = 0;
    t.arg[kArgItemWaitBase] = kNoCounter;
    t.arg[kArgItemSignalBase] = up_done;
    t.arg[kArgTiles] = up_tiles;
    order.push_back(t);
  }
  for (int c = 0; c < 6; ++c) {
    TaskDescriptor t = Task(kExpertDownClaim);
    t.row_end = B;
    t.wait0_counter = items_ready;
    t.wait0_target = ready_target;
    t.flags = claim_flags;
    t.arg[kArgQueue] = 1;
    t.arg[kArgItemWaitBase] = up_done;
    t.arg[kArgItemSignalBase] = rows_done;
    t.arg[kArgTiles] = down_tiles;
    t.arg[kArgTiles2] = up_tiles;
    order.push_back(t);
  }
  for (int r = 0; r < B; ++r) {
    TaskDescriptor t = Task(kMoeCombine);
    t.row_begin = r;
    t.row_end = r + 1;
    t.wait0_counter = rows_done + r;
    t.wait0_target = K * down_tiles;
    order.push_back(t);
  }
  // Each row's picks (logit, expert), best first; planted, last first.
  std::vector<std::vector<std::pair<float, int>>> picks(B);
  for (int r = 0; r < B; ++r) {
    for (int e = 0; e < E; ++e) {
      double dot = 0;
      for (int k = 0; k < H; ++k) dot += m.router[e * H + k] * x[r * H + k];
      picks[r].push_back({static_cast<float>(dot), e});
    }
    std::stable_sort(picks[r].begin(), picks[r].end(),
                     [](auto a, auto b) { return a.first > b.first; });
    picks[r].resize(K);
    if (planted) std::reverse(picks[r].begin(), picks[r].end());
  }
  if (planted) {
    std::vector<uint64_t> words;
    for (int r = 0; r < B; ++r) {
      for (const auto& [logit, e] : picks[r]) {
        const float weight = 1.0f / (1.0f + std::exp(-logit));
        uint32_t bits;
        std::memcpy(&bits, &weight, sizeof(bits));
        words.push_back((static_cast<uint64_t>(e + 1) << 32) | bits);
      }
    }
    MKSERVE_CUDA_CHECK(cudaMemcpy(m.p.published_picks, words.data(),
                                  words.size() * sizeof(uint64_t), cudaMemcpyHostToDevice));
  }
  RunLists(m.p, RoundRobin(order));

  std::vector<float> want(int64_t{B} * H, 0.0f);
  std::vector<int32_t> want_ids;
  for (int r = 0; r < B; ++r) {
    for (int j = 0; j < K; ++j) {
      const int e = picks[r][j].second;
      want_ids.push_back(e);
      const float weight = 1.0f / (1.0f + std::exp(-picks[r][j].first));
      std::vector<float> h(I);
      for (int i = 0; i < I; ++i) {
        double g = 0, u = 0;
        for (int k = 0; k < H; ++k) {
          g += m.experts_gate_up[(int64_t{e} * 2 * I + i) * H + k] * x[r * H + k];
          u += m.experts_gate_up[(int64_t{e} * 2 * I + I + i) * H + k] * x[r * H + k];
        }
        h[i] = RoundBf16(static_cast<float>(g / (1 + std::exp(-g)) * u));
      }
      for (int n = 0; n < H; ++n) {
        double d = 0;
        for (int i = 0; i < I; ++i) d += m.experts_down[(int64_t{e} * H + n) * I + i] * h[i];
        want[r * H + n] += weight * static_cast<float>(d);
      }
    }
  }
  const std::vector<int32_t> ids = ToHost(m.ints[0]);
  for (int r = 0; r < B; ++r) {
    for (int j = 0; j < K; ++j) EXPECT_EQ(ids[r * K + j], want_ids[r * K + j]) << "row " << r;
  }
  ExpectClose(ToHost(m.floats[3]), want, 2e-3f, 2e-2f, "ffn_out");
}

// Router logits that test a top-k: a row of `E` experts for each kind of this list, in order:
// all tied; two tied highs with NaNs and -inf below; distinct random values; zeros of both signs
// above -1s.
std::vector<float> TopKLogits(const std::vector<int>& kinds, int E = M::kExperts) {
  const float inf = INFINITY, nan = NAN;
  std::vector<float> logits(kinds.size() * E, 0.5f);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  for (size_t r = 0; r < kinds.size(); ++r) {
    for (int e = 0; e < E; ++e) {
      float& v = logits[r * E + e];
      switch (kinds[r]) {
        case 1:
          v = e % 5 == 0 ? nan : e == 7 || e == 9 ? 2.0f : e == 3 ? 1.0f : -inf;
          break;
        case 2:
          v = uniform(rng);
          break;
        case 3:
          v = e == 2 || e == 9 ? -0.0f : e == 5 || e == 12 ? 0.0f : -1.0f;
          break;
        default:
          break;  // 0: all tied at 0.5
      }
    }
  }
  return logits;
}

// The picks a top-k must make of `logits` (rows of `E` experts): ties to the lower id (-0 and +0
// tie), a NaN ranks as -inf; `softmax`: weights exp(l - top) / sum, else sigmoid(l) undivided.
// Returns the ids, row-major, for the caller's own checks.
std::vector<int> ExpectPicks(const std::vector<float>& logits, int K, bool softmax,
                             const std::vector<int32_t>& ids, const std::vector<float>& weights,
                             int E = M::kExperts) {
  const int B = static_cast<int>(logits.size()) / E;
  std::vector<int> want_ids;
  for (int r = 0; r < B; ++r) {
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    auto value = [&](int e) {
      const float v = logits[r * E + e];
      return std::isnan(v) ? -INFINITY : v;
    };
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return value(a) > value(b); });
    const float top = value(order[0]);
    double sum = 0;
    std::vector<float> w(K);
    for (int j = 0; j < K; ++j) {
      const float v = value(order[j]);
      w[j] = softmax ? std::exp(v - top) : 1.0f / (1.0f + std::exp(-v));
      sum += w[j];
    }
    for (int j = 0; j < K; ++j) {
      const int a = r * K + j;
      EXPECT_EQ(ids[a], order[j]) << "row " << r << " pick " << j;
      EXPECT_NEAR(weights[a], softmax ? w[j] / sum : w[j], 1e-6) << "row " << r << " pick " << j;
      want_ids.push_back(order[j]);
    }
  }
  return want_ids;
}

// The top-k task on logits written straight into router_logits: the picks (ExpectPicks), the
// logits left as they were (a block per layer), each expert's bucket slots 0..count-1.
void RunTopK(bool softmax) {
  cuda::testing::RequireGpu();
  constexpr int B = 5, K = 4, E = M::kExperts;
  M m(B, K);
  m.p.sigmoid_router = softmax ? 0 : 1;
  const std::vector<float> logits = TopKLogits({0, 1, 2, 2, 3});
  m.floats.push_back(ToDevice(logits));
  m.p.router_logits = m.floats.back().data();
  TaskDescriptor t = Task(kTopK);
  t.row_end = B;
  RunLists(m.p, {{t}});

  const std::vector<int32_t> ids = ToHost(m.ints[0]), slots = ToHost(m.ints[1]);
  const std::vector<float> after = ToHost(m.floats.back());
  const std::vector<int32_t> counts = ToHost(m.ints[2]);
  const std::vector<int> want_ids = ExpectPicks(logits, K, softmax, ids, ToHost(m.floats[5]));
  EXPECT_EQ(ids[K], 7);  // the tie of 2.0s: the lower id first
  EXPECT_EQ(ids[K + 1], 9);
  EXPECT_EQ(ids[K + 3], 0);  // -inf and NaN tie below 1.0: id 0 (a NaN) is the lowest
  EXPECT_EQ(ids[4 * K], 2);  // -0 before +0 only by its lower id
  EXPECT_EQ(ids[4 * K + 1], 5);
  std::vector<int> want_counts(E, 0);
  std::vector<std::vector<int>> seen_slots(E);
  for (int a = 0; a < B * K; ++a) {
    ++want_counts[want_ids[a]];
    seen_slots[want_ids[a]].push_back(slots[a]);
  }
  for (int e = 0; e < E; ++e) {
    EXPECT_EQ(counts[e], want_counts[e]) << "expert " << e;
    std::sort(seen_slots[e].begin(), seen_slots[e].end());
    for (int i = 0; i < static_cast<int>(seen_slots[e].size()); ++i) {
      EXPECT_EQ(seen_slots[e][i], i) << "expert " << e;
    }
  }
  for (int i = 0; i < B * E; ++i) {
    EXPECT_TRUE(after[i] == logits[i] || (std::isnan(after[i]) && std::isnan(logits[i])))
        << "logit " << i;
  }
}

// The same logits ranked by gate/up claims that run the top-k themselves (kFlagTopKInClaims, by
// pick, nothing published): the first claims rank (TakePicks), and each pick's record is written
// with its first item. Four rows, the most a claim ranks.
void RunTopKInClaims(bool softmax) {
  cuda::testing::RequireGpu();
  constexpr int B = 4, K = 4, up_tiles = M::kExpertWidth / 32;
  M m(B, K);
  m.p.sigmoid_router = softmax ? 0 : 1;
  const std::vector<float> logits = TopKLogits({0, 1, 2, 3});
  m.floats.push_back(ToDevice(logits));
  m.p.router_logits = m.floats.back().data();
  m.p.x_norm = m.Bf16(RandomBf16Values(int64_t{B} * M::kHidden, 31));
  m.p.tiles.expert_up = 32;
  std::vector<int32_t> identity(B * K);
  std::iota(identity.begin(), identity.end(), 0);
  DeviceBuffer<int32_t> identity_d = ToDevice(identity);
  m.p.bucket_assignment = m.p.routed_position = identity_d.data();
  DeviceBuffer<uint32_t> offsets = ToDevice(std::vector<uint32_t>{0});
  DeviceBuffer<uint32_t> queue_counts = ToDevice(std::vector<uint32_t>{12345});
  DeviceBuffer<uint32_t> queue_heads = ToDevice(std::vector<uint32_t>{0});
  DeviceBuffer<uint32_t> counters = ToDevice(std::vector<uint32_t>(B * K, 0));
  m.p.queue_offsets = offsets.data();
  m.p.queue_counts = queue_counts.data();
  m.p.queue_heads = queue_heads.data();
  m.p.counters = counters.data();
  std::vector<TaskDescriptor> claims;
  for (int c = 0; c < 3; ++c) {
    TaskDescriptor t = Task(kExpertGateUpClaim);
    t.row_end = B;
    t.flags = kFlagPickItems | kFlagTopKInClaims;
    t.arg[kArgQueue] = 0;
    t.arg[kArgItemWaitBase] = kNoCounter;
    t.arg[kArgItemSignalBase] = 0;
    t.arg[kArgTiles] = up_tiles;
    claims.push_back(t);
  }
  RunLists(m.p, RoundRobin(claims));

  const std::vector<int32_t> ids = ToHost(m.ints[0]);
  ExpectPicks(logits, K, softmax, ids, ToHost(m.floats[5]));
  EXPECT_EQ(ids[K], 7);  // the tie of 2.0s: the lower id first
  EXPECT_EQ(ids[K + 1], 9);
  EXPECT_EQ(ids[3 * K], 2);  // -0 before +0 only by its lower id
  EXPECT_EQ(ids[3 * K + 1], 5);
  const std::vector<uint32_t> arrivals = ToHost(counters);
  for (int a = 0; a < B * K; ++a) EXPECT_EQ(arrivals[a], up_tiles) << "pick " << a;
}

// More than 128 experts: the top-k's lanes hold eight keys each (North's 128 take four). Rows of
// 256 experts: all tied, random, and a row whose best keys tie across a lane's slots (ids 33 and
// 161, lane 1) and across lanes (ids 200 and 255), with the rest random below them.
TEST(MegakernelOps, TopKOverMoreThan128Experts) {
  cuda::testing::RequireGpu();
  constexpr int B = 3, K = 8, E = 256;
  M m(B, K);
  m.p.num_experts = E;
  m.p.sigmoid_router = 1;
  std::vector<float> logits = TopKLogits({0, 2, 2}, E);
  for (int e = 0; e < E; ++e) logits[2 * E + e] -= 10.0f;  // below the planted ties
  for (int e : {33, 161}) logits[2 * E + e] = 3.0f;
  for (int e : {200, 255}) logits[2 * E + e] = 2.5f;
  m.floats.push_back(ToDevice(logits));
  m.p.router_logits = m.floats.back().data();
  m.p.expert_counts = reinterpret_cast<uint32_t*>(m.Ints(E, 0));
  TaskDescriptor t = Task(kTopK);
  t.row_end = B;
  RunLists(m.p, {{t}});
  const std::vector<int32_t> ids = ToHost(m.ints[0]);
  ExpectPicks(logits, K, /*softmax=*/false, ids, ToHost(m.floats[5]), E);
  EXPECT_EQ(ids[2 * K], 33);
  EXPECT_EQ(ids[2 * K + 1], 161);
  EXPECT_EQ(ids[2 * K + 2], 200);
  EXPECT_EQ(ids[2 * K + 3], 255);
}

TEST(MegakernelOps, TopKSigmoidTiesAndNan) { RunTopK(false); }
TEST(MegakernelOps, TopKSoftmaxTiesAndNan) { RunTopK(true); }
TEST(MegakernelOps, TopKInTheClaimsSigmoidTiesAndNan) { RunTopKInClaims(false); }
TEST(MegakernelOps, TopKInTheClaimsSoftmaxTiesAndNan) { RunTopKInClaims(true); }

TEST(MegakernelOps, MoeChainSmallBlocksMatchesCpu) { RunMoeChain(11, 4, 4); }
TEST(MegakernelOps, MoeChainWithTheTopKInTheClaimsMatchesCpu) {
  RunMoeChain(1, 4, 1, true);
  RunMoeChain(4, 8, 1, true);
}
TEST(MegakernelOps, MoeChainTakesPublishedPicks) {
  RunMoeChain(1, 4, 1, true, true);
  RunMoeChain(4, 8, 1, true, true);
}
// Blocks of up to 64 routed rows (batch 64's expert_rows): several staging passes per item.
TEST(MegakernelOps, MoeChainLargeBlocksMatchesCpu) { RunMoeChain(48, 8, 64); }

}  // namespace
}  // namespace mkserve::megakernel::testing
