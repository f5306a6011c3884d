// The verifier's model of what each task and work item reads and writes: rectangles of logical
// tensors (rows x columns, plus the K range a split-K writer adds). It restates the device ops'
// data contract from the descriptor fields, independently of how the builder chose them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "megakernel/schedule/schedule.h"
#include "megakernel/schedule/work_queues.h"
#include "model/model_config.h"

namespace mkserve::megakernel {

// Logical tensors of one step. Version = the layer (Residual / XNorm: the input of that layer,
// num_layers = after the last layer). kResidual, kAttnOut and kFfnOut have a buffer per layer
// (TensorReusesBuffer); so do kKvNew (the cache), kLogits and kSampled. The rest live in one
// buffer that every layer reuses.
enum class Tensor : uint8_t {
  kResidual,      // [B][hidden]
  kXNorm,         // [B][hidden]
  kQ,             // [B][q_width]
  kKvNew,         // [B][2 kv_width]: this step's K then V, in the paged cache (per layer)
  kAttnPartial,   // [B][kv_heads * slots]: split outputs
  kAttnIn,        // [B][q_width]: merged attention, the O-proj input
  kAttnOut,       // [B][hidden], K = q_width (O-proj split-K)
  kDenseHidden,   // [B][dense intermediate]
  kFfnOut,        // [B][hidden], K = dense intermediate (dense) or 1 (MoE)
  kRouterLogits,  // [B][experts], K = hidden
  kRouting,       // [B][top_k]: top-k ids, weights, bucket slots, a pick a column
  kExpertQueues,  // [1][1]: bucket offsets, routed positions and the expert item queues
  kMoeHidden,     // [B * top_k][expert intermediate], bucket order
  kMoeOut,        // [B * top_k][hidden], bucket order
  kLogits,        // [B][vocab]
  kSampled,       // [B][1], K = the sampling team (each member's share of the row's result)
  kCount,
};

struct TensorExtent {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t k_total = 1;  // a cell is complete when its writers' K ranges tile [0, k_total)
};

struct Access {
  Tensor tensor = Tensor::kCount;
  bool write = false;
  int32_t version = 0;
  int64_t row_begin = 0, row_end = 0;
  int64_t col_begin = 0, col_end = 0;
  int64_t k_begin = 0, k_end = 1;
};

bool TensorReusesBuffer(Tensor tensor);
const char* TensorName(Tensor tensor);
// The tensor's extent at `version`; the MoE tensors' rows are the routed rows.
TensorExtent ExtentOf(const ModelConfig& config, const Schedule& schedule, Tensor tensor,
                      int32_t version);

// Accesses of a static task (claim tasks have none: their items access data).
void TaskAccesses(const ModelConfig& config, const Schedule& schedule, const TaskDescriptor& task,
                  std::vector<Access>& out);
void AttentionItemAccesses(const ModelConfig& config, const Schedule& schedule, int32_t layer,
                           const AttentionWorkItem& item, std::vector<Access>& out);
// `down` selects the down queue's items; `queues` supplies the routed-row table.
void ExpertItemAccesses(const ModelConfig& config, const Schedule& schedule, int32_t layer,
                        const ExpertWorkItem& item, bool down, const ExpertQueues& queues,
                        std::vector<Access>& out);
// Item `index` of a kLmHeadClaim task's queue: one LM head tile (LmHeadItemBegin).
void LmHeadItemAccesses(const ModelConfig& config, const Schedule& schedule,
                        const TaskDescriptor& claim, uint32_t index, std::vector<Access>& out);
// kMoeCombine reads the bucket rows of its rows' experts, which only routing knows.
void MoeCombineAccesses(const ModelConfig& config, const TaskDescriptor& task,
                        const ExpertQueues& queues, std::vector<Access>& out);

}  // namespace mkserve::megakernel
