#include "megakernel/schedule/task_access.h"

namespace mkserve::megakernel {

namespace {

Access Read(Tensor tensor, int64_t version, int64_t row_begin, int64_t row_end, int64_t col_begin,
            int64_t col_end) {
  Access access;
  access.tensor = tensor;
  access.version = static_cast<int32_t>(version);
  access.row_begin = row_begin;
  access.row_end = row_end;
  access.col_begin = col_begin;
  access.col_end = col_end;
  return access;
}

Access Write(Tensor tensor, int64_t version, int64_t row_begin, int64_t row_end, int64_t col_begin,
             int64_t col_end, int64_t k_begin = 0, int64_t k_end = 1) {
  Access access = Read(tensor, version, row_begin, row_end, col_begin, col_end);
  access.write = true;
  access.k_begin = k_begin;
  access.k_end = k_end;
  return access;
}

int64_t Slots(const ModelConfig& config, const Schedule& schedule, int64_t layer) {
  if (layer < 0 || layer >= config.num_layers) return 1;
  return config.layers[layer].attention == AttentionKind::kSliding
             ? schedule.tiles.sliding_splits
             : schedule.tiles.full_split_slots;
}

// What a join reads, and a fused norm of layer l + 1: layer l's residual and both branch sums.
void LayerSumReads(int64_t l, int64_t r0, int64_t r1, int64_t hidden, std::vector<Access>& out) {
  out.push_back(Read(Tensor::kResidual, l, r0, r1, 0, hidden));
  out.push_back(Read(Tensor::kAttnOut, l, r0, r1, 0, hidden));
  out.push_back(Read(Tensor::kFfnOut, l, r0, r1, 0, hidden));
}

// A task that reads its layer's input: x_norm over its K range, or with kFlagFusedNorm the
// previous layer's sums of its rows, whole (the norm needs every element).
void InputReads(const TaskDescriptor& task, int64_t hidden, std::vector<Access>& out) {
  if ((task.flags & kFlagFusedNorm) != 0) {
    LayerSumReads(static_cast<int64_t>(task.layer) - 1, task.row_begin, task.row_end, hidden, out);
  } else {
    out.push_back(
        Read(Tensor::kXNorm, task.layer, task.row_begin, task.row_end, task.k_begin, task.k_end));
  }
}

}  // namespace

bool TensorReusesBuffer(Tensor tensor) {
  switch (tensor) {
    case Tensor::kResidual:
    case Tensor::kAttnOut:
    case Tensor::kFfnOut:
    case Tensor::kKvNew:
    case Tensor::kRouterLogits:  // a block per layer: claims that run the top-k read them late
    case Tensor::kLogits:
    case Tensor::kSampled:
      return false;
    default:
      return true;
  }
}

const char* TensorName(Tensor tensor) {
  switch (tensor) {
    case Tensor::kResidual:
      return "residual";
    case Tensor::kXNorm:
      return "x_norm";
    case Tensor::kQ:
      return "q";
    case Tensor::kKvNew:
      return "kv_new";
    case Tensor::kAttnPartial:
      return "attn_partial";
    case Tensor::kAttnIn:
      return "attn_in";
    case Tensor::kAttnOut:
      return "attn_out";
    case Tensor::kDenseHidden:
      return "dense_hidden";
    case Tensor::kFfnOut:
      return "ffn_out";
    case Tensor::kRouterLogits:
      return "router_logits";
    case Tensor::kRouting:
      return "routing";
    case Tensor::kExpertQueues:
      return "expert_queues";
    case Tensor::kMoeHidden:
      return "moe_hidden";
    case Tensor::kMoeOut:
      return "moe_out";
    case Tensor::kLogits:
      return "logits";
    case Tensor::kSampled:
      return "sampled";
    case Tensor::kCount:
      break;
  }
  return "unknown";
}

TensorExtent ExtentOf(const ModelConfig& config, const Schedule& schedule, Tensor tensor,
                      int32_t version) {
  const int64_t batch = schedule.batch;
  const int64_t routed = batch * config.num_experts_per_token;
  const bool dense =
      version >= 0 && version < config.num_layers && config.layers[version].ffn == FfnKind::kDense;
  const int64_t dense_width =
      dense ? config.layers[version].ffn_intermediate_size : config.dense_intermediate_size;
  switch (tensor) {
    case Tensor::kResidual:
    case Tensor::kXNorm:
      return {batch, config.hidden_size, 1};
    case Tensor::kQ:
    case Tensor::kAttnIn:
      return {batch, config.q_width(), 1};
    case Tensor::kKvNew:
      return {batch, 2 * config.kv_width(), 1};
    case Tensor::kAttnPartial:
      return {batch, config.num_kv_heads * Slots(config, schedule, version), 1};
    case Tensor::kAttnOut:
      return {batch, config.hidden_size, config.q_width()};
    case Tensor::kDenseHidden:
      return {batch, dense_width, 1};
    case Tensor::kFfnOut:
      return {batch, config.hidden_size, dense ? dense_width : 1};
    case Tensor::kRouterLogits:
      return {batch, config.num_experts, config.hidden_size};
    case Tensor::kRouting:
      return {batch, config.num_experts_per_token, 1};
    case Tensor::kSampled:  // a row's team writes it together, a K share per member
      return {batch, 1, SampleTeamSize(schedule.tiles, batch, schedule.num_sms)};
    case Tensor::kExpertQueues:
      return {1, 1, 1};
    case Tensor::kMoeHidden:
      return {routed, config.expert_intermediate_size, 1};
    case Tensor::kMoeOut:
      return {routed, config.hidden_size, 1};
    case Tensor::kLogits:
      return {batch, config.vocab_size, 1};
    case Tensor::kCount:
      break;
  }
  return {};
}

void TaskAccesses(const ModelConfig& config, const Schedule& schedule, const TaskDescriptor& task,
                  std::vector<Access>& out) {
  const int64_t l = task.layer;
  const int64_t r0 = task.row_begin, r1 = task.row_end;
  const int64_t out0 = task.arg[kArgOutBegin], out1 = task.arg[kArgOutEnd];
  const int64_t hidden = config.hidden_size;
  const int64_t group_width = config.num_heads / config.num_kv_heads * config.head_dim;
  const int64_t head = task.arg[kArgKvHead];
  const int64_t slots = task.arg[kArgSplits];
  switch (task.opcode) {
    case kEmbed:
      out.push_back(Write(Tensor::kResidual, 0, r0, r1, 0, hidden));
      out.push_back(Write(Tensor::kXNorm, 0, r0, r1, 0, hidden));
      break;
    case kJoin:
      LayerSumReads(l, r0, r1, hidden, out);
      out.push_back(Write(Tensor::kResidual, l + 1, r0, r1, 0, hidden));
      if ((task.flags & kFlagResidualOnly) == 0) {
        out.push_back(Write(Tensor::kXNorm, l + 1, r0, r1, 0, hidden));
      }
      break;
    case kQkv: {
      InputReads(task, hidden, out);
      const int64_t q = config.q_width();
      if (out1 <= q) {
        out.push_back(Write(Tensor::kQ, l, r0, r1, out0, out1));
      } else {
        out.push_back(Write(Tensor::kKvNew, l, r0, r1, out0 - q, out1 - q));
      }
      break;
    }
    case kAttention: {
      const int64_t d = config.head_dim, kv = config.kv_width();
      out.push_back(Read(Tensor::kQ, l, r0, r1, head * group_width, (head + 1) * group_width));
      out.push_back(Read(Tensor::kKvNew, l, r0, r1, head * d, (head + 1) * d));
      out.push_back(Read(Tensor::kKvNew, l, r0, r1, kv + head * d, kv + (head + 1) * d));
      if (slots == 1) {  // one split: attn_in directly, no combine
        out.push_back(
            Write(Tensor::kAttnIn, l, r0, r1, head * group_width, (head + 1) * group_width));
      } else {
        out.push_back(Write(Tensor::kAttnPartial, l, r0, r1, head * slots + task.split,
                            head * slots + task.split + 1));
      }
      break;
    }
    case kAttentionCombine:
      out.push_back(Read(Tensor::kAttnPartial, l, r0, r1, head * slots, (head + 1) * slots));
      out.push_back(
          Write(Tensor::kAttnIn, l, r0, r1, head * group_width, (head + 1) * group_width));
      break;
    case kOProj:
      out.push_back(Read(Tensor::kAttnIn, l, r0, r1, task.k_begin, task.k_end));
      out.push_back(Write(Tensor::kAttnOut, l, r0, r1, out0, out1, task.k_begin, task.k_end));
      break;
    case kDenseGateUp:
      out.push_back(Read(Tensor::kXNorm, l, r0, r1, task.k_begin, task.k_end));
      out.push_back(Write(Tensor::kDenseHidden, l, r0, r1, out0, out1));
      break;
    case kDenseDown:
      out.push_back(Read(Tensor::kDenseHidden, l, r0, r1, task.k_begin, task.k_end));
      out.push_back(Write(Tensor::kFfnOut, l, r0, r1, out0, out1, task.k_begin, task.k_end));
      break;
    case kRouter:
      InputReads(task, hidden, out);
      if ((task.flags & kFlagFusedNorm) != 0 && task.tile == 0) {  // x_norm for the experts
        out.push_back(Write(Tensor::kXNorm, l, r0, r1, task.k_begin, task.k_end));
      }
      out.push_back(Write(Tensor::kRouterLogits, l, r0, r1, out0, out1, task.k_begin, task.k_end));
      break;
    case kTopK:
    case kMoeFinalize:  // with kFlagWithTopK the finalize runs the top-k first
      if (task.opcode == kTopK || (task.flags & kFlagWithTopK) != 0) {
        out.push_back(Read(Tensor::kRouterLogits, l, r0, r1, 0, config.num_experts));
        out.push_back(Write(Tensor::kRouting, l, r0, r1, 0, config.num_experts_per_token));
      }
      if (task.opcode == kTopK) break;
      out.push_back(Read(Tensor::kRouting, l, 0, schedule.batch, 0, config.num_experts_per_token));
      out.push_back(Write(Tensor::kExpertQueues, l, 0, 1, 0, 1));
      break;
    case kLmHead:
      out.push_back(Read(Tensor::kXNorm, l, r0, r1, task.k_begin, task.k_end));
      out.push_back(Write(Tensor::kLogits, l, r0, r1, out0, out1));
      break;
    case kSample:  // every member depends on the whole row (the team exchanges its slices)
      out.push_back(Read(Tensor::kLogits, l, r0, r1, 0, config.vocab_size));
      out.push_back(Write(Tensor::kSampled, l, r0, r1, 0, 1, task.arg[kArgTeamRank],
                          task.arg[kArgTeamRank] + 1));
      break;
    default:
      break;  // kNop, claims (their items access data), kMoeCombine (MoeCombineAccesses)
  }
}

void AttentionItemAccesses(const ModelConfig& config, const Schedule& schedule, int32_t layer,
                           const AttentionWorkItem& item, std::vector<Access>& out) {
  const int64_t group_width = config.num_heads / config.num_kv_heads * config.head_dim;
  const int64_t d = config.head_dim, kv = config.kv_width();
  const int64_t r = item.row, h = item.kv_head;
  const int64_t slots = schedule.tiles.full_split_slots;
  out.push_back(Read(Tensor::kQ, layer, r, r + 1, h * group_width, (h + 1) * group_width));
  out.push_back(Read(Tensor::kKvNew, layer, r, r + 1, h * d, (h + 1) * d));
  out.push_back(Read(Tensor::kKvNew, layer, r, r + 1, kv + h * d, kv + (h + 1) * d));
  // The split writes its slot and, as the row's last split, the unused slots after it.
  out.push_back(Write(Tensor::kAttnPartial, layer, r, r + 1, h * slots + item.split,
                      h * slots + item.split + item.arrive_weight));
}

void ExpertItemAccesses(const ModelConfig& config, const Schedule& schedule, int32_t layer,
                        const ExpertWorkItem& item, bool down, const ExpertQueues& queues,
                        std::vector<Access>& out) {
  const int64_t b0 = item.bucket_begin, b1 = b0 + item.row_count;
  if (schedule.tiles.pick_items != 0) {  // the expert id and the row, from the pick's top-k
    // By pick the bucket position is the pick, row * top_k + k.
    const int64_t row = queues.routed_row.at(b0), k = b0 % config.num_experts_per_token;
    if (TopKInClaimsAt(schedule.tiles, schedule.batch) && !down) {  // the claimer's own top-k
      out.push_back(Read(Tensor::kRouterLogits, layer, row, row + 1, 0, config.num_experts));
      if (item.tile == 0) out.push_back(Write(Tensor::kRouting, layer, row, row + 1, k, k + 1));
    } else {
      out.push_back(Read(Tensor::kRouting, layer, row, row + 1, k, k + 1));
    }
  } else {
    out.push_back(Read(Tensor::kExpertQueues, layer, 0, 1, 0, 1));
  }
  if (!down) {
    const int64_t tile = schedule.tiles.expert_up_tile;
    for (int64_t position = b0; position < b1; ++position) {
      const int64_t row = queues.routed_row.at(position);
      out.push_back(Read(Tensor::kXNorm, layer, row, row + 1, 0, config.hidden_size));
    }
    out.push_back(
        Write(Tensor::kMoeHidden, layer, b0, b1, item.tile * tile, (item.tile + 1) * tile));
  } else {
    const int64_t tile = schedule.tiles.expert_down_tile;
    out.push_back(Read(Tensor::kMoeHidden, layer, b0, b1, 0, config.expert_intermediate_size));
    out.push_back(Write(Tensor::kMoeOut, layer, b0, b1, item.tile * tile, (item.tile + 1) * tile));
  }
}

void LmHeadItemAccesses(const ModelConfig& config, const Schedule& schedule,
                        const TaskDescriptor& claim, uint32_t index, std::vector<Access>& out) {
  const uint32_t width = static_cast<uint32_t>(schedule.tiles.lm_head_tile);
  TaskDescriptor tile = claim;  // the static tile it stands for
  tile.opcode = kLmHead;
  tile.arg[kArgOutBegin] = LmHeadItemBegin(claim, index, width);
  tile.arg[kArgOutEnd] = tile.arg[kArgOutBegin] + width;
  TaskAccesses(config, schedule, tile, out);
}

void MoeCombineAccesses(const ModelConfig& config, const TaskDescriptor& task,
                        const ExpertQueues& queues, std::vector<Access>& out) {
  const int64_t l = task.layer;
  const int64_t top_k = config.num_experts_per_token;
  for (int64_t row = task.row_begin; row < task.row_end; ++row) {
    out.push_back(Read(Tensor::kRouting, l, row, row + 1, 0, top_k));
    for (int64_t k = 0; k < top_k; ++k) {
      const int64_t position = queues.bucket_of.at(row * top_k + k);
      out.push_back(Read(Tensor::kMoeOut, l, position, position + 1, 0, config.hidden_size));
    }
    out.push_back(Write(Tensor::kFfnOut, l, row, row + 1, 0, config.hidden_size));
  }
}

}  // namespace mkserve::megakernel
