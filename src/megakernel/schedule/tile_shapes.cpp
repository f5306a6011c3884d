#include "megakernel/schedule/tile_shapes.h"

#include <algorithm>
#include <string>

#include "backends/cuda/core/weight_panels.h"
#include "common/error.h"
#include "megakernel/task_abi.h"

namespace mkserve::megakernel {

namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The largest power of two <= preferred that divides width.
int64_t DividingTile(int64_t width, int64_t preferred) {
  int64_t tile = 1;
  while (tile * 2 <= preferred && width % (tile * 2) == 0) tile *= 2;
  return tile;
}

void Require(bool ok, const std::string& what) {
  if (!ok) throw Error("invalid megakernel tile shapes: " + what);
}

void RequireDivides(int64_t tile, int64_t width, const char* field, const char* dimension) {
  Require(tile >= 1 && width % tile == 0, std::string(field) + " = " + std::to_string(tile) +
                                              " must divide " + dimension + " (" +
                                              std::to_string(width) + ")");
}

}  // namespace

int64_t SampleTeamSize(const TileShapes& tiles, int64_t batch, int64_t num_sms) {
  const int64_t most = tiles.sample_team != 0 ? tiles.sample_team : int64_t{kMaxSampleTeam};
  return std::max<int64_t>(1, std::min<int64_t>(most, num_sms / batch));
}

TileShapes ChooseTileShapes(const ModelConfig& config, int64_t batch, const ContextBucket& bucket,
                            int64_t num_sms) {
  if (batch < 1 || batch > kMaxBatch) {
    throw Error("megakernel batch must be 1.." + std::to_string(kMaxBatch) + ", got " +
                std::to_string(batch));
  }
  if (num_sms < 1) throw Error("num_sms must be at least 1, got " + std::to_string(num_sms));
  TileShapes tiles;
  tiles.row_tile = batch <= 32 ? 1 : 2;
  tiles.qkv_tile = DividingTile(config.head_dim, 64);
  tiles.oproj_tile = DividingTile(config.hidden_size, 64);
  if (config.dense_intermediate_size > 0) {
    tiles.dense_up_tile = DividingTile(config.dense_intermediate_size, 64);
    const int64_t up_tiles = config.dense_intermediate_size / tiles.dense_up_tile;
    tiles.dense_down_splits =
        up_tiles % 2 == 0 && config.dense_intermediate_size / 2 % cuda::kPanelChunk == 0 ? 2 : 1;
  }
  tiles.dense_down_tile = DividingTile(config.hidden_size, 64);
  if (config.num_experts > 0) {
    tiles.router_tile = DividingTile(config.num_experts, 16);  // one warp: 2 experts, not 8
    // One row: 32 features. With items by pick they are ready while the attention SMs still
    // attend, and the SMs without attention take the first of them: 192 items (two on 60 SMs)
    // beat one wave of 48-feature items (H200, one binary, alternating: 8K 3.030-3.093 against
    // 3.065-3.128 ms, 1K 2.846-2.871 against 2.970-2.986; 24 and 64 slower than 48). From 8
    // rows, 128: half the claims for the same bytes (batch 8 10.24 -> 10.13 ms, 32 22.29 ->
    // 22.01, 64 30.38 -> 29.80). Between them, 64.
    tiles.expert_up_tile = DividingTile(config.expert_intermediate_size, batch == 1  ? 32
                                                                         : batch < 8 ? 64
                                                                                     : 128);
  }
  tiles.router_splits = config.hidden_size % (4 * 8) == 0 ? 4 : 1;  // K ranges of 8s
  // Up to 4 rows the finalize runs the top-k itself, handing counts and picks on in shared memory
  // (H200, 8K, against separate top-k tasks, two runs: batch 2 4.665 / 4.590 -> 4.627 / 4.596
  // ms, 4 6.614 / 6.582 -> 6.549 / 6.495, batch 1 the same; batch 8 9.746 / 9.659 -> 9.819 /
  // 9.713, where 8 top-k tasks on 8 SMs beat one warp a row in one task).
  tiles.topk_in_finalize = batch <= 4 ? 1 : 0;
  // One row: expert items by pick. A row's picks are distinct experts, so nothing streams twice,
  // and the claims start after the top-k instead of the finalize. From two rows, rows that share
  // an expert would stream it once per pick (real routing shares more than random weights do).
  tiles.pick_items = batch == 1 ? 1 : 0;
  // By pick at one row the gate/up claims pick the experts themselves: no top-k task and none of
  // its two hops (H200: 1K batch 1 2.821 -> 2.742 ms, 8K 2.96 -> 2.95, the router primed in both).
  tiles.topk_in_claims_max_batch = 1;
  // The fused norm: each QKV and router task normalises its rows one after another, so only at
  // the smallest batches, where the join's hop is the largest share of a layer.
  tiles.fused_norm_max_batch = 2;
  // One row: the router tasks (16 KB of weights each) head the routing chain that holds the
  // expert items back, and their weights are copied before their wait.
  tiles.prime_router = batch == 1 ? 1 : 0;
  // QKV tasks wait for the previous layer's end with nothing to do; their weights do not. H100,
  // 8K, 36 layers, kernel ms, priming on / off in one binary: batch 1 2.340 / 2.353, 2 3.526 /
  // 3.537, 8 8.448 / 8.434 (its QKV tasks 11.3 -> 9.9 us at batch 1).
  tiles.prime_qkv_max_batch = 2;
  // Batches 2-4: one early gate/up item on each SM without a QKV tile, whose attention task
  // would wait for the QKV tiles (H200, 8K, kernel ms, two rounds: batch 2 4.185 / 4.207 ->
  // 4.114 / 4.131, 3 5.480 / 5.519 -> 5.285 / 5.344, 4 6.248 / 6.266 -> 6.239 / 6.246; at 1K
  // within 1 %). Not at 1, where the routing chain (the claims rank the picks) ends as late as
  // the QKV tiles (8K the same, 1K 1.5 % slower), nor 8 and 64 (0.6 and 1.1 % slower).
  tiles.early_expert_items = batch >= 2 && batch <= 4 ? 1 : 0;
  tiles.expert_rows = std::min<int64_t>(64, CeilDiv(batch, 8) * 8);
  // Down items of 256 features from two rows on: half the claims and signals for the same
  // bytes, which the weight ring streams as fast (H200, 8K: batch 8 10.54 -> 10.27 ms, 16 16.04
  // -> 15.47, 64 31.62 -> 30.31; batch 2 the same, batch 1 3.77 -> 3.84, so it keeps 128).
  tiles.expert_down_tile = DividingTile(config.hidden_size, batch == 1 ? 128 : 256);
  tiles.lm_head_tile = DividingTile(config.vocab_size, batch <= 8 ? 64 : 128);
  // The LM head streams 1 GB for North with every SM at once, and SMs differ: in a batch-1 trace
  // on the H200 the SMs' mean 64-row tile took 7.8-8.8 us, so with 31 static tiles each the
  // first SM ended at 253 us and the last at 284. With the last 4 tiles per SM claimed, an SM
  // that streams faster takes more of them (H200, 8K, kernel ms, three rounds in one call:
  // batch 1 2.780-2.795 against 2.791-2.825 all static in the same binary and 2.806-2.816 in
  // the one before; batches 2 and 8 0.4 % faster, 64 the same; 2 or 8 a SM no better).
  tiles.lm_head_claimed_per_sm = 4;

  // Enough (row, KV head, split) units to cover the SMs, no split under min_pages_per_split pages.
  const int64_t units = batch * config.num_kv_heads;
  const int64_t wanted = std::max<int64_t>(1, CeilDiv(num_sms, units));
  const int64_t cap = bucket.max_context_tokens <= 65536 ? 16 : kMaxAttentionSplits;
  // One row up to 16K: the full layers' attention in at most 8 splits (H200, kernel ms, three
  // calls, policy full_split_slots 8 against 16 in one process: 4K 2.736-2.752 against
  // 2.783-2.804, 8K 2.787-2.806 against 2.811-2.844; 1K, 2K and 16K within 0.5 %; 32K 3.18-3.20
  // against 3.02-3.04, so not there).
  const int64_t full_cap = batch == 1 && bucket.max_context_tokens <= 16384 ? 8 : cap;
  auto splits_for = [&](int64_t pages, int64_t most) {
    return std::clamp<int64_t>(std::min(wanted, pages / tiles.min_pages_per_split), 1, most);
  };
  // Batches 3 and 4 (11 and 9 splits to cover the SMs): at most 8 in sliding layers (H200,
  // kernel ms, policy sliding_splits 8 against the default in one process, two rounds each: 4K
  // batch 3 5.13-5.18 against 5.20-5.23, batch 4 6.07 against 6.12-6.13; 8K 5.25-5.30 against
  // 5.32-5.33 and 6.16-6.18 against 6.21-6.23; 16K and 32K 0.2-1 % faster, 1K the same). Batch 2
  // was mixed (8K 0.5-1 % faster, 16K up to 0.9 % slower), so it keeps 16. Batch 1, with the
  // weights in panels: at most 4 (a window's 64 pages in splits of 16; H200, 8K, kernel ms, three
  // processes with the policies in both orders: 2.619-2.625 against 2.647-2.649 with 16, 8
  // 2.633-2.640, 2 2.742-2.748; 1K, where the default was already 4, unchanged).
  const int64_t sliding_cap = batch == 1 ? 4 : batch == 3 || batch == 4 ? 8 : cap;
  tiles.sliding_splits = splits_for(bucket.max_sliding_pages, sliding_cap);
  tiles.full_split_slots = splits_for(bucket.max_full_pages, full_cap);
  tiles.attention_claimers = num_sms;
  tiles.expert_claimers = num_sms;
  return tiles;
}

TileShapes WithTileOverrides(TileShapes tiles, const std::map<std::string, int64_t>& overrides) {
  const std::pair<const char*, int64_t TileShapes::*> fields[] = {
      {"row_tile", &TileShapes::row_tile},
      {"qkv_tile", &TileShapes::qkv_tile},
      {"oproj_tile", &TileShapes::oproj_tile},
      {"dense_up_tile", &TileShapes::dense_up_tile},
      {"dense_down_tile", &TileShapes::dense_down_tile},
      {"dense_down_splits", &TileShapes::dense_down_splits},
      {"router_tile", &TileShapes::router_tile},
      {"router_splits", &TileShapes::router_splits},
      {"expert_rows", &TileShapes::expert_rows},
      {"expert_up_tile", &TileShapes::expert_up_tile},
      {"expert_down_tile", &TileShapes::expert_down_tile},
      {"lm_head_tile", &TileShapes::lm_head_tile},
      {"sliding_splits", &TileShapes::sliding_splits},
      {"full_split_slots", &TileShapes::full_split_slots},
      {"min_pages_per_split", &TileShapes::min_pages_per_split},
      {"attention_claimers", &TileShapes::attention_claimers},
      {"expert_claimers", &TileShapes::expert_claimers},
      {"topk_in_finalize", &TileShapes::topk_in_finalize},
      {"pick_items", &TileShapes::pick_items},
      {"topk_in_claims_max_batch", &TileShapes::topk_in_claims_max_batch},
      {"fused_norm_max_batch", &TileShapes::fused_norm_max_batch},
      {"prime_router", &TileShapes::prime_router},
      {"prime_qkv_max_batch", &TileShapes::prime_qkv_max_batch},
      {"prime_lm_head_max_batch", &TileShapes::prime_lm_head_max_batch},
      {"sample_team", &TileShapes::sample_team},
      {"early_expert_items", &TileShapes::early_expert_items},
      {"lm_head_claimed_per_sm", &TileShapes::lm_head_claimed_per_sm},
  };
  for (const auto& [name, value] : overrides) {
    const auto* field = std::find_if(std::begin(fields), std::end(fields),
                                     [&name = name](const auto& f) { return name == f.first; });
    Require(field != std::end(fields), "no tile shape field \"" + name + "\"");
    tiles.*(field->second) = value;
  }
  return tiles;
}

void ValidateTileShapes(const TileShapes& tiles, const ModelConfig& config, int64_t batch) {
  Require(batch >= 1 && batch <= kMaxBatch,
          "batch must be 1.." + std::to_string(kMaxBatch) + ", got " + std::to_string(batch));
  Require(tiles.row_tile >= 1, "row_tile must be at least 1");
  RequireDivides(tiles.qkv_tile, config.head_dim, "qkv_tile", "head_dim");
  Require(tiles.qkv_tile % 2 == 0, "qkv_tile must be even (RoPE pairs)");
  RequireDivides(tiles.oproj_tile, config.hidden_size, "oproj_tile", "hidden_size");
  RequireDivides(tiles.dense_down_tile, config.hidden_size, "dense_down_tile", "hidden_size");
  if (config.num_dense_layers() > 0) {
    RequireDivides(tiles.dense_up_tile, config.dense_intermediate_size, "dense_up_tile",
                   "dense_intermediate_size");
    RequireDivides(tiles.dense_down_splits, config.dense_intermediate_size / tiles.dense_up_tile,
                   "dense_down_splits", "the dense gate/up tile count");
    Require(config.dense_intermediate_size / tiles.dense_down_splits % cuda::kPanelChunk == 0,
            "dense_down_splits must leave K ranges of a multiple of " +
                std::to_string(cuda::kPanelChunk) + " (whole weight panel chunks)");
  }
  if (config.num_moe_layers() > 0) {
    RequireDivides(tiles.router_tile, config.num_experts, "router_tile", "num_experts");
    RequireDivides(tiles.router_splits, config.hidden_size, "router_splits", "hidden_size");
    Require(config.hidden_size / tiles.router_splits % 8 == 0,
            "router_splits must leave K ranges of a multiple of 8");
    RequireDivides(tiles.expert_up_tile, config.expert_intermediate_size, "expert_up_tile",
                   "expert_intermediate_size");
    RequireDivides(tiles.expert_down_tile, config.hidden_size, "expert_down_tile", "hidden_size");
    Require(tiles.expert_rows >= 1 && tiles.expert_rows <= kMaxBatch,
            "expert_rows must be 1.." + std::to_string(kMaxBatch) +
                " (a row block never holds more rows than the batch)");
    Require(tiles.expert_claimers >= 1 && tiles.expert_claimers <= kMaxClaimers,
            "expert_claimers must be 1.." + std::to_string(kMaxClaimers));
    Require(tiles.topk_in_finalize == 0 || tiles.topk_in_finalize == 1,
            "topk_in_finalize must be 0 or 1");
    Require(tiles.pick_items == 0 || tiles.pick_items == 1, "pick_items must be 0 or 1");
    Require(tiles.topk_in_claims_max_batch >= 0 &&
                tiles.topk_in_claims_max_batch <= kMaxTopKInClaimsBatch,
            "topk_in_claims_max_batch must be 0.." + std::to_string(kMaxTopKInClaimsBatch));
    Require(tiles.prime_router == 0 || tiles.prime_router == 1, "prime_router must be 0 or 1");
    Require(tiles.early_expert_items >= 0 && tiles.early_expert_items <= kMaxEarlyExpertItems,
            "early_expert_items must be 0.." + std::to_string(kMaxEarlyExpertItems));
    const int64_t router_slice_bytes =
        tiles.router_tile * (config.hidden_size / tiles.router_splits) * 2;
    Require(tiles.prime_router == 0 || router_slice_bytes <= kMaxPrimedRouterBytes,
            "prime_router needs a router slice (router_tile x hidden_size / router_splits bf16) "
            "of at most " +
                std::to_string(kMaxPrimedRouterBytes) + " bytes, got " +
                std::to_string(router_slice_bytes));
  }
  for (const auto& [max_batch, name] :
       {std::pair{tiles.prime_qkv_max_batch, "prime_qkv_max_batch"},
        std::pair{tiles.prime_lm_head_max_batch, "prime_lm_head_max_batch"}}) {
    Require(max_batch >= 0 && max_batch <= kMaxPrimedTileRows,
            std::string(name) + " must be 0.." + std::to_string(kMaxPrimedTileRows));
  }
  Require(tiles.fused_norm_max_batch >= 0 && tiles.fused_norm_max_batch <= kMaxFusedNormBatch,
          "fused_norm_max_batch must be 0.." + std::to_string(kMaxFusedNormBatch));
  Require(tiles.sample_team >= 0 && tiles.sample_team <= kMaxSampleTeam,
          "sample_team must be 0.." + std::to_string(kMaxSampleTeam) + ", got " +
              std::to_string(tiles.sample_team));
  RequireDivides(tiles.lm_head_tile, config.vocab_size, "lm_head_tile", "vocab_size");
  Require(
      tiles.lm_head_claimed_per_sm >= 0 && tiles.lm_head_claimed_per_sm <= kMaxLmHeadClaimedPerSm,
      "lm_head_claimed_per_sm must be 0.." + std::to_string(kMaxLmHeadClaimedPerSm));
  Require(tiles.sliding_splits >= 1 && tiles.sliding_splits <= kMaxAttentionSplits,
          "sliding_splits must be 1.." + std::to_string(kMaxAttentionSplits));
  Require(tiles.full_split_slots >= 1 && tiles.full_split_slots <= kMaxAttentionSplits,
          "full_split_slots must be 1.." + std::to_string(kMaxAttentionSplits));
  Require(tiles.min_pages_per_split >= 1, "min_pages_per_split must be at least 1");
  Require(tiles.attention_claimers >= 1 && tiles.attention_claimers <= kMaxClaimers,
          "attention_claimers must be 1.." + std::to_string(kMaxClaimers));
}

}  // namespace mkserve::megakernel
