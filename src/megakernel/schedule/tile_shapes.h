// TileShapes: how each op of one decode step is cut into tasks for a given batch size. The builder
// takes them as data; ChooseTileShapes is the default choice and the place to tune.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "megakernel/schedule/context_bucket.h"
#include "model/model_config.h"

namespace mkserve::megakernel {

inline constexpr int64_t kMaxBatch = 64;  // GEMM tiles put the batch on the MMA's N (<= 64 here)
inline constexpr int64_t kMaxAttentionSplits = 32;  // KV splits per (row, KV head): partials slots
inline constexpr int64_t kMaxFusedNormBatch = 8;    // a fused QKV task stages its rows as one chunk
inline constexpr int64_t kMaxTopKInClaimsBatch = 4;         // picks a claim keeps: rows x top_k
inline constexpr int64_t kMaxEarlyExpertItems = 1 << 20;    // a bound that fits kArgMaxItems
inline constexpr int64_t kMaxLmHeadClaimedPerSm = 1 << 20;  // a bound that fits kArgTiles
// Claim tasks per queue: a policy's count beyond this would only build (and verify) millions of
// tasks, one after another on each SM, that find their queue empty.
inline constexpr int64_t kMaxClaimers = 4096;

struct TileShapes {
  int64_t row_tile = 1;             // rows per task of per-row ops (embed, join, top-k, sample)
  int64_t qkv_tile = 64;            // output features per QKV task; divides head_dim
  int64_t oproj_tile = 64;          // output features per O-proj task (split-K: one KV head each)
  int64_t dense_up_tile = 64;       // dense gate/up: features of gate (and as many of up) per task
  int64_t dense_down_tile = 64;     // dense down: output features per task
  int64_t dense_down_splits = 2;    // dense down split-K over the intermediate width
  int64_t router_tile = 64;         // experts per router task
  int64_t router_splits = 4;        // router split-K over hidden
  int64_t expert_rows = 8;          // routed rows per expert row block
  int64_t expert_up_tile = 64;      // expert gate/up: features of gate (and up) per item
  int64_t expert_down_tile = 128;   // expert down: output features per item
  int64_t lm_head_tile = 64;        // vocabulary entries per LM head task
  int64_t sliding_splits = 1;       // static KV splits per (row, KV head) in sliding layers
  int64_t full_split_slots = 1;     // most KV splits per (row, KV head) in full layers (claimed)
  int64_t min_pages_per_split = 4;  // the full-layer queue never cuts a row finer than this
  int64_t attention_claimers = 1;   // claim tasks per full-attention layer
  int64_t expert_claimers = 1;      // claim tasks per MoE layer, for each of its two queues
  int64_t topk_in_finalize = 0;     // 1: the finalize task runs the layer's top-k (a hop less)
  // 1: expert items by pick (kFlagPickItems): each routed (row, k) is its own item block, the
  // top-k's ids name the experts, no finalize task. An expert two rows pick streams twice.
  int64_t pick_items = 0;
  // Batches up to this size (at most kMaxTopKInClaimsBatch), when by pick, have the expert claims
  // run the top-k themselves (kFlagTopKInClaims): no top-k task, and none of its two hops,
  // between the routers and the first expert item. 0: never.
  int64_t topk_in_claims_max_batch = 0;
  // Batches up to this size fuse the norm: MoE layers' QKV and router tasks normalise their
  // input themselves (no join on the path). 0: never; at most kMaxFusedNormBatch.
  int64_t fused_norm_max_batch = 0;
  // 1: router tasks copy their weight slice into shared memory before their wait
  // (kFlagPrimeWeights; at most kMaxPrimedRouterBytes a task).
  int64_t prime_router = 0;
  // Batches up to this size (at most kMaxPrimedTileRows) have QKV tasks copy their first weight
  // rounds into the ring before their wait (kFlagPrimeWeights). 0: never.
  int64_t prime_qkv_max_batch = 0;
  // The same for the LM head's static tiles (the claimed ones are not known before their
  // claim). 0: never.
  int64_t prime_lm_head_max_batch = 0;
  // The most members a row's sampling team (kSample) has; 0: kMaxSampleTeam. Fewer where the
  // SMs do not give every member of every row its own.
  int64_t sample_team = 0;
  // Items an early gate/up claim (kArgMaxItems) takes on each SM that holds no QKV task of a MoE
  // layer, ahead of its attention wave: those SMs would otherwise idle from their router task
  // until the QKV tiles end. 0: no early claims.
  int64_t early_expert_items = 0;
  // The LM head's last tiles, this many per SM (at most all of them), are claimed from a queue
  // after the static ones, so the SMs that stream faster take more of them. 0: all static.
  int64_t lm_head_claimed_per_sm = 0;

  bool operator==(const TileShapes&) const = default;
};

// Whether a schedule of `batch` rows fuses the norm (of every MoE layer after the first).
inline bool FusesNormAt(const TileShapes& tiles, int64_t batch) {
  return batch <= tiles.fused_norm_max_batch;
}

// Whether a schedule of `batch` rows has its expert claims run the top-k (kFlagTopKInClaims).
inline bool TopKInClaimsAt(const TileShapes& tiles, int64_t batch) {
  return tiles.pick_items != 0 && batch <= tiles.topk_in_claims_max_batch;
}

// Members of each row's sampling team: as many as give every member of every row an SM of its
// own, at most tiles.sample_team (0: kMaxSampleTeam), at least 1.
int64_t SampleTeamSize(const TileShapes& tiles, int64_t batch, int64_t num_sms);

// The default shapes for `batch` rows on `num_sms` SMs serving `bucket`.
TileShapes ChooseTileShapes(const ModelConfig& config, int64_t batch, const ContextBucket& bucket,
                            int64_t num_sms);

// `tiles` with the named fields replaced (a schedule policy's "tiles"); throws mkserve::Error on
// a name that is not a field. Values are checked by ValidateTileShapes when a schedule is built.
TileShapes WithTileOverrides(TileShapes tiles, const std::map<std::string, int64_t>& overrides);

// Throws mkserve::Error naming the field when a shape does not divide the dimension it cuts, cuts
// K ranges the device cannot load (16-byte vectors: multiples of 8 elements) or is out of range,
// so a bad tuning value (a policy's "tiles") fails when the schedule is built, not on the device.
void ValidateTileShapes(const TileShapes& tiles, const ModelConfig& config, int64_t batch);

}  // namespace mkserve::megakernel
