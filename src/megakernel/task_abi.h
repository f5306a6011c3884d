// The task ABI of the decode megakernel: the fixed-width descriptor every SM reads from its task
// list, the opcodes of one decode step, the work-queue item records, and the timeline record.
// Host (schedule builder, verifier) and device (the kernel) both include this file; it is the
// only contract between them, so it changes only additively.
//
// Change log for the kernel engineer (newest first):
//   v1.10: kFlagPrimeWeights on kQkv tasks of up to 8 rows (their first weight rounds copied
//          into the weight ring before the wait).
//   v1.9: kLmHeadClaim (the LM head's last tiles claimed from a queue, so fast SMs take more).
//   v1.8: kArgMaxItems (a claim that stops after that many items; 0: until its queue is empty).
//   v1.7: kFlagPrimeWeights (a router task copies its weight slice before its wait);
//         kFlagTopKInClaims (by pick, the claims run the top-k: no kTopK task); router logits
//         hold one [batch][experts] block per layer; by pick the bucket tables are the identity,
//         set by the host, not written by the top-k.
//   v1.6: kSample runs on the device: one task per member of a row's sampling team
//         (kArgTeamRank, kArgTeamSize).
//   v1.5: kFlagPickItems (expert items by pick: no finalize, no item records).
//   v1.4: kFlagFusedNorm and kFlagResidualOnly (the fused norm); residual, attn_out and ffn_out
//         hold one row block per layer.
//   v1.3: ItemTimestamp, the per-item timeline records of claim tasks.
//   v1.2: static kAttention as the device runs it: no page range in k_begin / k_end; one split
//         writes attn_in and then the layer has no combine (the builder used to add one, which
//         overwrote attn_in from stale slot-0 statistics whenever a sliding layer had one split,
//         i.e. at batch > 32).
//   v1.1: kArgOutBegin / kArgOutEnd (as device/task_abi_ext.h asked; drop the copies there).
//   v1: initial layout (arg[kArgSequence] and the attention slot rule are part of v1).
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace mkserve::megakernel {

inline constexpr uint32_t kTaskAbiVersion = 1;

// A counter id that means "no counter": a wait on it is satisfied, a signal to it does nothing.
inline constexpr uint32_t kNoCounter = 0xFFFFFFFFu;

// What one task does. One decode step, per layer l (parallel block: attention and FFN read the
// same normalised input x_norm and meet again in the join):
//   kEmbed (layer 0 only) -> kQkv -> kAttention | kAttentionClaim -> kAttentionCombine -> kOProj
//   and, in parallel, layer 0: kDenseGateUp -> kDenseDown;
//                     MoE layers: kRouter -> kTopK -> kMoeFinalize -> kExpertGateUpClaim
//                                 -> kExpertDownClaim -> kMoeCombine
//   -> kJoin (residual += attn_out + ffn_out; x_norm = RMSNorm(residual) * gamma of layer l+1,
//             or the final norm after the last layer)
// then kLmHead -> kSample.
enum Opcode : uint32_t {
  kNop = 0,  // does nothing but its waits and its signal: a barrier when it has both
  // rows [row_begin, row_end): residual = embedding[token]; x_norm = RMSNorm(residual) with
  // layer 0's input norm. Signals once per task.
  kEmbed = 1,
  // rows [row_begin, row_end): residual[l + 1] = residual[l] + attn_out[l] + ffn_out[l], then
  // x_norm = RMSNorm(residual[l + 1]) with the input norm of layer+1 (flag kFlagFinalNorm: the
  // model's final norm; kFlagResidualOnly: no norm). Every layer has its own attn_out and ffn_out
  // rows, zeroed before the step.
  kJoin = 2,
  // One output tile of the fused QKV projection of x_norm. arg[kArgQkvPart] says Q, K or V,
  // arg[kArgKvHead] the KV head the tile belongs to. RoPE in the epilogue when kFlagRope; K and V
  // tiles are written into the paged cache at each row's position through the layer's group table.
  kQkv = 3,
  // Split-KV paged decode attention for rows [row_begin, row_end), KV head arg[kArgKvHead], GQA:
  // all query heads of the KV head. Split `split` of arg[kArgSplits] takes its share of the pages
  // of the row's live window (k_begin / k_end are not used). With several splits it writes the
  // partial output + log-sum-exp of slot `split` for the combine; with one split it writes the
  // normalised output into attn_in itself and the schedule has no combine for that layer.
  kAttention = 4,
  // Claims AttentionWorkItem records from queue arg[kArgQueue] until it is empty, running each as
  // a kAttention. Used for full-attention layers, whose split count follows the live length.
  kAttentionClaim = 5,
  // LSE-weighted merge of the splits of (rows, KV head arg[kArgKvHead]) into attn_in (O-proj
  // input).
  kAttentionCombine = 6,
  // One output tile of O-proj over K range [k_begin, k_end) (split = the KV head whose query heads
  // it reads); added into attn_out (an accumulate-into buffer).
  kOProj = 7,
  // Layer-0 dense MLP: one tile of gate and up over x_norm with fused SiLU(gate)*up -> ffn_hidden.
  kDenseGateUp = 8,
  // Layer-0 dense MLP: one tile of down over K range [k_begin, k_end), added into ffn_out.
  kDenseDown = 9,
  // One tile of router logits (experts) over K range [k_begin, k_end), added into router_logits.
  kRouter = 10,
  // Rows [row_begin, row_end): top-k of the router logits (sigmoid or softmax as the config says),
  // weights, and a slot in each chosen expert's bucket (atomic count per expert; with
  // kFlagPickItems the identity bucket tables instead).
  kTopK = 11,
  // One per MoE layer: prefix-sums the expert bucket counts and writes the ExpertWorkItem queues
  // (gate/up queue arg[kArgQueue], down queue arg[kArgQueue2]) and their counts. With
  // kFlagWithTopK it first runs kTopK for rows [row_begin, row_end) itself (no kTopK tasks).
  kMoeFinalize = 12,
  // Claims ExpertWorkItem records from queue arg[kArgQueue]: gate and up of one expert for one row
  // block, one output tile, fused SiLU*up -> moe_hidden (rows in bucket order).
  kExpertGateUpClaim = 13,
  // Claims ExpertWorkItem records from queue arg[kArgQueue]: down of one expert for one row block,
  // one output tile -> moe_out (bucket order). Signals one arrival per real row of the block.
  kExpertDownClaim = 14,
  // Rows [row_begin, row_end): ffn_out[row] = sum over the row's top-k of weight * moe_out.
  kMoeCombine = 15,
  // One vocabulary tile of logits = x_norm (after the final norm) . embedding^T * logit_scale,
  // written fp32 into the logits output [B][vocab].
  kLmHead = 16,
  // One member (rank arg[kArgTeamRank]) of the team of arg[kArgTeamSize] tasks that samples logits
  // row row_begin (row_end = row_begin + 1) after the whole LM head: each member takes a slice of
  // the vocabulary and the team meets at barriers of its own (a per-row exchange outside the
  // counters), so a team of more than one is on distinct SMs and each member is the last task of
  // its SM's list. Writes the row's argmax and, for a row the step samples, its token and logprobs.
  kSample = 17,
  // Claims LM head tiles from queue arg[kArgQueue] until it is empty: item i is the vocabulary
  // tile [arg[kArgOutBegin] + i * w, + w) of the LM head's tile width w, run as a kLmHead; each
  // item adds 1 to counters[arg[kArgItemSignalBase]] and waits for nothing beyond the task's own
  // waits. The queue holds no records; its count is arg[kArgTiles].
  kLmHeadClaim = 18,
  kOpcodeCount = 19,
};

// Bits of TaskDescriptor::flags.
enum TaskFlag : uint32_t {
  kFlagRope = 1u << 0,        // kQkv: apply RoPE to Q and K tiles
  kFlagSliding = 1u << 1,     // attention ops: sliding-window layer (window in arg[kArgWindow])
  kFlagAccumulate = 1u << 2,  // the output is added (atomically) into a zeroed buffer (split-K)
  kFlagFinalNorm = 1u << 3,   // kJoin after the last layer: use the final norm weight
  kFlagWithTopK = 1u << 4,    // kMoeFinalize: run the layer's top-k first, in the same task
  // kQkv, kRouter of layer l >= 1: compute the layer's input norm from layer l-1's residual,
  // attn_out and ffn_out instead of reading x_norm (they wait for layer l-1's O-proj and FFN, not
  // its join). A kRouter task with tile 0 also writes its K range of x_norm for the expert items.
  kFlagFusedNorm = 1u << 5,
  // kJoin: write the next residual only, no norm (the next layer's tasks fuse it).
  kFlagResidualOnly = 1u << 6,
  // Expert items by pick, a layer without kMoeFinalize. kTopK: each pick (row r, k) is its own
  // bucket, position a = r * top_k + k; the assignment and routed-position tables are written as
  // the identity and no bucket counts are taken. Claim tasks: the queue holds no records; item i
  // is pick a = i / arg[kArgTiles], output tile i % arg[kArgTiles], of expert topk_ids[a], for
  // rows x top_k x arg[kArgTiles] items; a gate/up item signals unit a, a down item waits for unit
  // a to reach arg[kArgTiles2] (the gate/up tiles) and signals its row.
  kFlagPickItems = 1u << 7,
  // Weights copied into shared memory before the task's wait (they depend on nothing the step
  // computes). kRouter: the task's slice (arg tile's experts x [k_begin, k_end)), at most
  // kMaxPrimedRouterBytes. kQkv and kLmHead (at most kMaxPrimedTileRows rows): each
  // worker warp's first weight ring rounds, which the GEMM body then does not issue again.
  kFlagPrimeWeights = 1u << 8,
  // Claims by pick (with kFlagPickItems) of a layer without kTopK tasks: they wait for the
  // router tasks. A gate/up claim computes its rows' top-k itself (every claimer the same picks
  // from the same logits) and runs the item of pick a on expert pick a's id; the item of tile 0
  // writes pick a's id and weight (and routing record) before its arrival. A down claim reads
  // topk_ids[a] after its item's wait, which covers that write.
  kFlagTopKInClaims = 1u << 9,
};

inline constexpr uint32_t kMaxPrimedRouterBytes = 64 * 1024;
// A primed GEMM tile runs the GEMM body's ring path, which takes tiles of up to 8 rows.
inline constexpr uint32_t kMaxPrimedTileRows = 8;

// The descriptor: 32 x uint32 (128 bytes, 16-byte aligned so a CTA loads it as 8 x uint4).
// A task waits until counters[wait0_counter] >= wait0_target AND counters[wait1_counter] >=
// wait1_target (kNoCounter skips a wait; wait0 is checked first), runs, makes its stores visible
// and then adds 1 to counters[signal_counter] (kNoCounter: no signal). Claim tasks
// (kAttentionClaim, kExpertGateUpClaim, kExpertDownClaim, kLmHeadClaim) are different: their own
// waits gate the first claim, they signal nothing themselves, and each claimed item waits and
// signals through the counter bases in arg[] plus the unit the item names (see the item records
// below; kLmHeadClaim's items are tile indices and name none).
struct alignas(16) TaskDescriptor {
  uint32_t opcode;         // an Opcode
  uint32_t layer;          // decoder layer; num_layers for the LM head and kSample
  uint32_t tile;           // output tile index along the op's output features (GEMMs)
  uint32_t split;          // split-K index (GEMMs) or KV split index (kAttention)
  uint32_t k_begin;        // GEMMs: first K element
  uint32_t k_end;          // one past the last K element
  uint32_t row_begin;      // first batch row the task covers
  uint32_t row_end;        // one past the last batch row
  uint32_t wait0_counter;  // counter id or kNoCounter
  uint32_t wait0_target;   // wait until counter >= target
  uint32_t wait1_counter;  // second wait (e.g. the join waits attention and FFN)
  uint32_t wait1_target;
  uint32_t signal_counter;  // counter id incremented by 1 after the task, or kNoCounter
  uint32_t flags;           // TaskFlag bits
  uint32_t arg[18];         // op-specific, indexed by the kArg* constants below
};
static_assert(sizeof(TaskDescriptor) == 128, "the device loads a descriptor as 8 x uint4");
static_assert(alignof(TaskDescriptor) == 16, "the device loads a descriptor as 8 x uint4");

inline constexpr int kTaskWords = sizeof(TaskDescriptor) / sizeof(uint32_t);

// Indices into TaskDescriptor::arg. One op uses only the ones its comment names.
enum TaskArg : uint32_t {
  kArgQkvPart = 0,  // kQkv: 0 = Q, 1 = K, 2 = V
  kArgKvHead = 1,   // kQkv, kAttention, kAttentionCombine: the KV head
  kArgWindow = 2,   // attention ops: sliding window in tokens (0 = full attention)
  kArgSplits = 3,   // kAttention: splits of this (row, head); kAttentionCombine: split slots
  kArgQueue = 4,    // claim ops and kMoeFinalize: queue id
  kArgQueue2 = 5,   // kMoeFinalize: the down queue id
  // Claim ops: a claimed item waits counters[item_wait_base + item.wait_unit] >= item.wait_target
  // and signals counters[item_signal_base + item.signal_unit + i] for each of its signal_count
  // units, by its arrive_weight.
  kArgItemWaitBase = 6,
  kArgItemSignalBase = 7,
  kArgTileRows = 8,  // claim ops, kMoeFinalize: rows per expert row block
  kArgTiles = 9,     // kMoeFinalize: gate/up tiles per row block (the down items' wait target);
                     // claims with kFlagPickItems: their queue's tiles per pick; kLmHeadClaim:
                     // the tiles its queue holds
  kArgTiles2 = 10,   // kMoeFinalize: down tiles per row block; down claims with
                     // kFlagPickItems: gate/up tiles per pick
  // Static GEMM ops (kQkv, kOProj, kDenseGateUp, kDenseDown, kRouter, kLmHead): the tile's output
  // features [out_begin, out_end) in the op's own output space: kQkv the fused q|k|v rows,
  // kDenseGateUp intermediate index i (gate row i and up row i), kOProj / kDenseDown hidden,
  // kRouter experts, kLmHead vocabulary. kLmHeadClaim: out_begin is its queue's first feature.
  kArgOutBegin = 11,
  kArgOutEnd = 12,
  kArgTeamRank = 13,  // kSample: this member's rank in its row's team, 0..size-1
  kArgTeamSize = 14,  // kSample: members of the row's team, 1..kMaxSampleTeam
  // Claim ops whose items never wait: claim at most this many items, then end (0: until the queue
  // is empty). Such a claim may take none; the queue's unlimited claimers take the rest.
  kArgMaxItems = 15,
  // Every task: its position in the schedule's global (wave) order. The device ignores it; the
  // verifier checks lists against it and the timeline export names tasks by it.
  kArgSequence = 17,
  kArgCount = 18,
};

// The most members of one row's sampling team (a member's worker threads read one exchange slot
// each).
inline constexpr uint32_t kMaxSampleTeam = 256;

// One full-attention work item, built by the host per step from the rows' live lengths (the same
// items for every full layer of the step; the claim task supplies the layer and counter bases).
// Split `split` of (row, kv_head) covers KV pages [page_begin, page_end) of the row's full-group
// block table and writes partial slot `split`. The combine of (row, kv head) reads a fixed number
// of slots (arg[kArgSplits], its static wait target); a row with fewer splits than slots gives its
// last split arrive_weight = slots - split, and that split also writes LSE = -inf into the unused
// slots (split, split + arrive_weight), so every slot is written exactly once and the combine's
// target never depends on the live length.
struct alignas(16) AttentionWorkItem {
  uint32_t row;
  uint32_t kv_head;
  uint32_t split;
  uint32_t page_begin;
  uint32_t page_end;
  uint32_t wait_unit;  // item wait counter = base + wait_unit (the QKV tiles of kv_head)
  uint32_t wait_target;
  uint32_t signal_unit;    // item signal counter = base + signal_unit ((row, kv head))
  uint32_t arrive_weight;  // added to the signal counter
  uint32_t signal_count;   // always 1 for attention
  uint32_t reserved[2];
};
static_assert(sizeof(AttentionWorkItem) == 48);

// One expert work item written by kMoeFinalize (or built by a claim from its index,
// kFlagPickItems): expert `expert`, row block `row_block`, i.e. the routed rows [bucket_begin,
// bucket_begin + row_count) of the expert-sorted bucket list, output tile `tile`. Gate/up items
// wait for nothing beyond their claim task's own waits (wait_unit = kNoCounter) and signal the
// (expert, row block) unit once. Down items wait for all gate/up tiles of their (expert, row block)
// and signal once per real row: the counter of batch row r is base + r, where r comes from the
// routed-row table (bucket position -> batch row); signal_count = row_count. A row's kMoeCombine
// therefore waits for top_k * down tiles arrivals, a static target.
struct alignas(16) ExpertWorkItem {
  uint32_t expert;
  uint32_t row_block;
  uint32_t tile;
  uint32_t bucket_begin;
  uint32_t row_count;
  uint32_t wait_unit;  // kNoCounter, or (expert, row block) gate/up counter unit
  uint32_t wait_target;
  uint32_t signal_unit;  // gate/up: the (expert, row block) unit; down: kNoCounter (per row)
  uint32_t arrive_weight;
  uint32_t signal_count;
  uint32_t reserved[2];
};
static_assert(sizeof(ExpertWorkItem) == 48);

// Item `index` of a queue by pick (kFlagPickItems), `tiles` items per pick: pick a = index /
// tiles is its one-row bucket and its unit; gate/up items signal unit a, down items wait for it to
// reach `up_tiles`. The claims build items with it on the device, ExpertItemsForRouting on the
// host: one definition.
MKSERVE_HOST_DEVICE inline ExpertWorkItem ExpertItemByPick(uint32_t index, uint32_t tiles,
                                                           uint32_t up_tiles, bool down,
                                                           uint32_t expert) {
  const uint32_t a = index / tiles;
  ExpertWorkItem item{};
  item.expert = expert;
  item.tile = index % tiles;
  item.bucket_begin = a;
  item.row_count = 1;
  item.wait_unit = down ? a : kNoCounter;
  item.wait_target = down ? up_tiles : 0;
  item.signal_unit = down ? kNoCounter : a;
  item.arrive_weight = 1;
  item.signal_count = 1;
  return item;
}

// The first vocabulary feature of item `index` of a kLmHeadClaim task's queue, `width` features a
// tile: the device runs it, the verifier models it, from this one definition.
MKSERVE_HOST_DEVICE inline uint32_t LmHeadItemBegin(const TaskDescriptor& claim, uint32_t index,
                                                    uint32_t width) {
  return claim.arg[kArgOutBegin] + index * width;
}

// Buffers the host zeroes before every step (together with all counters and queue cursors),
// because tasks add into them, or, for the published picks, read a zero as "not yet written".
// All but the queue cursors have a block per layer.
enum ScratchBuffer : uint32_t {
  kScratchAttnOut = 0,         // [layers][B][hidden] fp32, O-proj split-K adds
  kScratchFfnOut = 1,          // [layers][B][hidden] fp32, dense down split-K adds
  kScratchRouterLogits = 2,    // [layers][B][experts] fp32, router split-K adds
  kScratchExpertCounts = 3,    // [layers][experts] uint32, top-k bucket slots
  kScratchQueueHeads = 4,      // [queues] uint32, claim cursors
  kScratchPublishedPicks = 5,  // [layers][B][top_k] uint64, kFlagTopKInClaims's picks
  kScratchBufferCount = 6,
};

// Timeline (optional): the kernel writes one record per executed task at
// records[sm * max_tasks_per_sm + task_index], times from %globaltimer in nanoseconds: the task's
// start (before its wait), when its wait ended (its inputs were ready; a claim task's own wait,
// before it claims items) and its end (the workers are done; the controller warp signals after).
struct TaskTimestamp {
  uint64_t start_ns;
  uint64_t ready_ns;
  uint64_t end_ns;
};
static_assert(sizeof(TaskTimestamp) == 24);

// With the timeline on, claim tasks also write one record per item they ran, at
// items[queue * stride + item index]: before the claim, when the item's wait ended, when its
// arrival was posted to the controller warp, and the SM that ran it (claimed = 1; 0 for an item
// no one ran).
struct ItemTimestamp {
  uint64_t start_ns;
  uint64_t ready_ns;
  uint64_t end_ns;
  uint32_t sm;
  uint32_t claimed;
};
static_assert(sizeof(ItemTimestamp) == 32);

MKSERVE_HOST_DEVICE inline bool IsClaimOpcode(uint32_t opcode) {
  return opcode == kAttentionClaim || opcode == kExpertGateUpClaim || opcode == kExpertDownClaim ||
         opcode == kLmHeadClaim;
}

}  // namespace mkserve::megakernel
