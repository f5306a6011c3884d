// StepParams: everything the persistent kernel reads besides the task lists, passed by value as
// the kernel's parameter. Geometry, weight pointers per layer, the step's inputs, the scratch
// buffers the ops hand each other, the counters and the optional timeline. Plain data so host
// code (the decoder, tests) fills it without CUDA headers beyond the bf16 type.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backends/cuda/sampling/sample_rows.h"
#include "megakernel/task_abi.h"

namespace mkserve::megakernel {

using bf16 = __nv_bfloat16;

// One decoder layer's weights and KV cache (pointers into DeviceWeights, ProjectionPanels and
// KvPool). The projections are in panels (weight_panels.h), the router and norm row-major.
struct LayerParams {
  const bf16* input_norm = nullptr;       // [hidden]
  const bf16* qkv = nullptr;              // [q_width + 2 kv_width][hidden], adjacent-row pairs
  const bf16* o_proj = nullptr;           // [hidden][q_width], adjacent-row pairs
  const bf16* dense_gate_up = nullptr;    // [2 I][hidden], pairs (gate row i, up row i)
  const bf16* dense_down = nullptr;       // [hidden][I], adjacent-row pairs
  const bf16* router = nullptr;           // [experts][hidden], row-major
  const bf16* experts_gate_up = nullptr;  // per expert ExpertGateUpPanels (weight_layout.h)
  const bf16* experts_down = nullptr;     // per expert ExpertDownPanels
  int32_t intermediate = 0;               // dense width, or one expert's width
  bf16* kv_cache = nullptr;               // [blocks][64][K/V][kv_heads][head_dim]
  const int32_t* block_tables = nullptr;  // [batch][max_pages] of the layer's KV group
  int32_t max_pages = 0;
  int32_t window = 0;  // sliding window in tokens, 0: full attention
  int32_t uses_rope = 0;
};

// Output features per task of each GEMM op (the schedule's TileShapes): a task's `tile` covers
// [tile * width, (tile + 1) * width) of its op's outputs (kQkv: within its q, k or v part).
struct TileWidths {
  int32_t qkv = 0;
  int32_t oproj = 0;
  int32_t dense_up = 0;  // gate features (and as many up features)
  int32_t dense_down = 0;
  int32_t router = 0;
  int32_t lm_head = 0;
  int32_t expert_up = 0;
  int32_t expert_down = 0;
  int32_t expert_rows = 0;  // routed rows per expert row block
};

// What one row's sampling team (kSample) exchanges, per batch row. A team meets at most
// kSampleRounds times and merges at most kSampleHistograms histograms in a step (the deepest
// request, top logprobs then top-k, top-p, min-p and a draw that descends twice, takes 28 and 15).
inline constexpr int kSampleRounds = 32;
inline constexpr int kSampleHistograms = 16;
inline constexpr int kSampleBins = 2048;  // the radix descent's widest digit: 11 bits

// Zeroed before every step that runs kSample: the members' arrivals at each meeting.
struct SampleBarriers {
  uint32_t arrivals[kSampleRounds];
};

// Zeroed before a step that samples the row in the kernel: the merged histograms.
struct SampleHistograms {
  uint32_t counts[kSampleHistograms][kSampleBins];
  unsigned long long masses[kSampleHistograms][kSampleBins];
};

// Written before they are read (never zeroed): one slot per member and meeting, and the members'
// top entries for the top logprobs.
struct alignas(16) SampleSlot {
  unsigned long long low, high;
};
struct SampleSlots {
  SampleSlot slots[kSampleRounds][kMaxSampleTeam];
  cuda::TopEntries top[kMaxSampleTeam];
};

struct StepParams {
  // Geometry.
  int32_t batch = 0;
  int32_t hidden = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t vocab = 0;
  int32_t num_experts = 0;
  int32_t top_k = 0;
  int32_t num_layers = 0;
  int32_t sigmoid_router = 1;  // 0: softmax over the top-k
  int32_t renormalize = 0;     // sigmoid: divide the top-k weights by their sum
  float norm_eps = 1e-6f;
  float logit_scale = 1.0f;
  float rope_theta = 10000.0f;
  TileWidths tiles;

  // Weights.
  const LayerParams* layers = nullptr;  // device array [num_layers]
  const bf16* embed = nullptr;          // [vocab][hidden]
  const bf16* final_norm = nullptr;     // [hidden]
  const bf16* lm_head = nullptr;        // [vocab][hidden] in panels, adjacent-row pairs

  // The step's inputs.
  const int32_t* token_ids = nullptr;  // [batch]
  const int32_t* positions = nullptr;  // [batch]: the new token's position = context length

  // Scratch, all [batch][...] unless said otherwise.
  float* residual = nullptr;       // [layers + 1] blocks of [batch][hidden]: each layer's input
  bf16* x_norm = nullptr;          // [hidden]
  float* x_norm_f32 = nullptr;     // [hidden], the router's input
  bf16* q = nullptr;               // [num_heads * head_dim], RoPE applied
  float* attn_partial = nullptr;   // [num_heads][max_splits][head_dim]
  float* attn_stats = nullptr;     // [num_heads][max_splits][2]: max (log2), sum
  int32_t max_splits = 0;          // split slots per (row, head)
  bf16* attn_in = nullptr;         // [num_heads * head_dim], O-proj input
  float* attn_out = nullptr;       // [layers] blocks of [batch][hidden], zeroed per step
  float* ffn_out = nullptr;        // [layers] blocks, zeroed per step (dense down adds)
  bf16* ffn_hidden = nullptr;      // [dense I]
  float* router_logits = nullptr;  // [layers] blocks of [batch][experts], zeroed per step
  // kFlagTopKInClaims: [layers] blocks of [batch][top_k] picks, (expert + 1) << 32 | the weight's
  // bits, zeroed per step; the first claims rank and write them, later ones read them.
  uint64_t* published_picks = nullptr;
  int32_t* topk_ids = nullptr;        // [top_k]
  float* topk_weights = nullptr;      // [top_k]
  int32_t* topk_slot = nullptr;       // [top_k]: slot inside the expert's bucket
  uint32_t* expert_counts = nullptr;  // [layers][experts], zeroed per step
  int32_t* bucket_offsets = nullptr;  // [experts + 1], written by kMoeFinalize
  // Written by kMoeFinalize; by pick both are the identity, the decoder's constant.
  int32_t* bucket_assignment = nullptr;  // [batch * top_k]: bucket position -> row * top_k + j
  int32_t* routed_position = nullptr;    // [batch * top_k]: row * top_k + j -> bucket position
  bf16* moe_hidden = nullptr;            // [batch * top_k][expert I], bucket order
  float* moe_out = nullptr;              // [batch * top_k][hidden], bucket order
  float* logits = nullptr;               // [vocab], fp32, logit_scale applied

  // Sampling inside the step (kSample). Row r with sample_request[r] >= 0 is sampled as
  // GpuSampler samples request sample_request[r] of `staged` (the arrays its Stage uploaded);
  // every other row gets its argmax in argmax_out[r]. Either way the row's token also goes to
  // picks_out[r] in device memory, where the next step's prepare kernel may take it from.
  const int32_t* sample_request = nullptr;  // [batch]
  cuda::StagedSamples staged;
  int32_t* argmax_out = nullptr;                  // [batch], host-mapped
  int32_t* picks_out = nullptr;                   // [batch], device
  SampleBarriers* sample_barriers = nullptr;      // [batch]
  SampleHistograms* sample_histograms = nullptr;  // [batch]
  SampleSlots* sample_slots = nullptr;            // [batch]

  // Work queues. Expert queue q holds its items at expert_items + queue_offsets[q] (every layer's
  // gate/up queue at one offset, its down queue at another: each layer overwrites the items of
  // the layer before); every attention queue of a step reads the one attention item array (items
  // are layer-independent).
  ExpertWorkItem* expert_items = nullptr;
  const AttentionWorkItem* attention_items = nullptr;
  const uint32_t* queue_offsets = nullptr;  // [queues]
  uint32_t* queue_counts = nullptr;         // [queues]: items in each queue
  uint32_t* queue_heads = nullptr;          // [queues]: claim cursors, zeroed per step

  // Synchronisation and diagnostics.
  uint32_t* counters = nullptr;
  const volatile uint32_t* abort_flag = nullptr;  // host-mapped: nonzero makes every wait give up
  uint32_t* aborted = nullptr;                    // device: set when a wait gave up
  TaskTimestamp* timeline = nullptr;              // optional: [sms][max_tasks_per_sm]
  ItemTimestamp* item_timeline = nullptr;         // with timeline: [queues][item_stride]
  uint32_t item_stride = 0;
  int32_t* routing = nullptr;  // optional: [layers][batch][top_k] the experts top-k chose
};

// The task lists, as Schedule::PackedTasks lays them out: SM s runs tasks[s * max_tasks_per_sm
// + i] for i < counts[s].
struct TaskLists {
  const TaskDescriptor* tasks = nullptr;
  const uint32_t* counts = nullptr;  // [num_sms]
  int32_t num_sms = 0;
  int32_t max_tasks_per_sm = 0;
};

}  // namespace mkserve::megakernel
