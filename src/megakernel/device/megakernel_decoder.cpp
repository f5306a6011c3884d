#include "megakernel/device/megakernel_decoder.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <utility>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/decode/argmax.h"
#include "common/error.h"
#include "megakernel/device/megakernel.h"
#include "megakernel/schedule/context_bucket.h"
#include "megakernel/schedule/timeline.h"
#include "megakernel/schedule/work_queues.h"

namespace mkserve::megakernel {
namespace {

template <typename T>
T* Alloc(std::vector<cuda::DeviceBuffer<T>>& owner, int64_t count) {
  owner.emplace_back(std::max<int64_t>(count, 1));
  MKSERVE_CUDA_CHECK(cudaMemset(owner.back().data(), 0, owner.back().bytes()));
  return owner.back().data();
}

// Ops the kernel runs; a schedule with any other refuses to launch.
bool KernelRuns(uint32_t opcode) { return opcode < kOpcodeCount; }

// Every MoE layer's block of `per_layer` values, layer l's at device + l * per_layer, in layer
// order.
template <class T>
std::vector<T> MoeLayerBlocks(const ModelConfig& config, const T* device, int64_t per_layer) {
  std::vector<T> values;
  for (int64_t l = 0; l < config.num_layers; ++l) {
    if (config.layers[l].ffn != FfnKind::kMoe) continue;
    const size_t at = values.size();
    values.resize(at + per_layer);
    MKSERVE_CUDA_CHECK(cudaMemcpy(values.data() + at, device + l * per_layer, per_layer * sizeof(T),
                                  cudaMemcpyDeviceToHost));
  }
  return values;
}

}  // namespace

struct MegakernelDecoder::Uploaded {
  const Schedule* schedule = nullptr;
  cuda::DeviceBuffer<TaskDescriptor> tasks;
  cuda::DeviceBuffer<uint32_t> counts;
  cuda::DeviceBuffer<uint32_t> counters;
  cuda::DeviceBuffer<uint32_t> queue_offsets;
  cuda::DeviceBuffer<uint32_t> queue_heads;
  cuda::DeviceBuffer<ExpertWorkItem> expert_items;
  size_t attention_capacity = 0;  // the most items an attention queue holds (in the upload)
  int64_t max_tasks_per_sm = 0;
};

MegakernelDecoder::MegakernelDecoder(const ModelConfig& config, const cuda::DeviceWeights& weights,
                                     const ProjectionPanels& panels, const cuda::KvPool& kv_pool,
                                     MegakernelDecoderOptions options)
    : config_(config),
      options_(std::move(options)),
      num_sms_(MegakernelGridSize()),
      cache_(config, options_.max_batch, DefaultBucketBounds(config.max_position_embeddings),
             MegakernelGridSize(), options_.policy) {
  if (std::optional<std::string> why = MegakernelUnsupportedReason(config)) throw Error(*why);
  const int64_t B = options_.max_batch, H = config.hidden_size, k = config.num_experts_per_token;
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const cuda::DeviceLayer& w = weights.layers()[l];
    const LayerSpec& spec = config.layers[l];
    LayerParams layer;
    layer.input_norm = w.input_norm;
    layer.qkv = panels.layer(l).qkv;
    layer.o_proj = panels.layer(l).o_proj;
    layer.dense_gate_up = panels.layer(l).dense_gate_up;
    layer.dense_down = panels.layer(l).dense_down;
    layer.router = w.router;
    layer.experts_gate_up = w.experts_gate_up;
    layer.experts_down = w.experts_down;
    layer.intermediate = static_cast<int32_t>(spec.ffn_intermediate_size);
    layer.kv_cache = kv_pool.layer_cache(l);
    layer.window =
        spec.attention == AttentionKind::kSliding ? static_cast<int32_t>(spec.window_tokens) : 0;
    layer.uses_rope = spec.uses_rope ? 1 : 0;
    layers_.push_back(layer);
    group_of_layer_.push_back(kv_pool.group_of_layer(l));
  }
  StepParams& p = base_;
  p.hidden = static_cast<int32_t>(H);
  p.num_heads = static_cast<int32_t>(config.num_heads);
  p.num_kv_heads = static_cast<int32_t>(config.num_kv_heads);
  p.head_dim = static_cast<int32_t>(config.head_dim);
  p.vocab = static_cast<int32_t>(config.vocab_size);
  p.num_experts = static_cast<int32_t>(config.num_experts);
  p.top_k = static_cast<int32_t>(k);
  p.num_layers = static_cast<int32_t>(config.num_layers);
  p.sigmoid_router = config.expert_selection == ExpertSelection::kSigmoid ? 1 : 0;
  p.renormalize = config.norm_topk_prob ? 1 : 0;
  p.norm_eps = config.norm_eps;
  p.logit_scale = config.logit_scale;
  p.rope_theta = static_cast<float>(config.rope_theta);
  p.embed = weights.embed();
  p.final_norm = weights.final_norm();
  p.lm_head = panels.lm_head();
  p.max_splits = kMaxAttentionSplits;
  const int64_t q_width = config.q_width(), experts = std::max<int64_t>(config.num_experts, 1);
  const int64_t expert_width = std::max<int64_t>(config.expert_intermediate_size, 1);
  const int64_t L = config.num_layers;
  p.residual = Alloc(float_buffers_, (L + 1) * B * H);
  p.x_norm = Alloc(bf16_buffers_, B * H);
  p.x_norm_f32 = Alloc(float_buffers_, B * H);
  p.q = Alloc(bf16_buffers_, B * q_width);
  p.attn_partial = Alloc(float_buffers_, B * q_width * kMaxAttentionSplits);
  p.attn_stats = Alloc(float_buffers_, B * config.num_heads * kMaxAttentionSplits * 2);
  p.attn_in = Alloc(bf16_buffers_, B * q_width);
  p.attn_out = Alloc(float_buffers_, L * B * H);
  p.ffn_out = Alloc(float_buffers_, L * B * H);
  p.ffn_hidden = Alloc(bf16_buffers_, B * std::max<int64_t>(config.dense_intermediate_size, 1));
  p.router_logits = Alloc(float_buffers_, L * B * experts);
  // Two int32 a pick: the buffers are 256-byte aligned.
  p.published_picks = reinterpret_cast<uint64_t*>(Alloc(int_buffers_, 2 * L * B * k));
  p.topk_ids = Alloc(int_buffers_, B * k);
  p.topk_weights = Alloc(float_buffers_, B * k);
  p.topk_slot = Alloc(int_buffers_, B * k);
  p.expert_counts = reinterpret_cast<uint32_t*>(Alloc(int_buffers_, config.num_layers * experts));
  p.bucket_offsets = Alloc(int_buffers_, experts + 1);
  p.bucket_assignment = Alloc(int_buffers_, B * k);
  p.routed_position = Alloc(int_buffers_, B * k);
  // By pick, bucket position a is pick a: both tables are this identity (Run points at it).
  std::vector<int32_t> identity(static_cast<size_t>(B * k));
  std::iota(identity.begin(), identity.end(), 0);
  pick_identity_ = cuda::DeviceBuffer<int32_t>(B * k);
  MKSERVE_CUDA_CHECK(cudaMemcpy(pick_identity_.data(), identity.data(), pick_identity_.bytes(),
                                cudaMemcpyHostToDevice));
  p.moe_hidden = Alloc(bf16_buffers_, B * k * expert_width);
  p.moe_out = Alloc(float_buffers_, B * k * H);
  p.aborted = reinterpret_cast<uint32_t*>(Alloc(int_buffers_, 1));
  if (options_.record_routing) routing_ = cuda::DeviceBuffer<int32_t>(config.num_layers * B * k);
  if (samples_in_step()) {
    sample_barriers_ = cuda::DeviceBuffer<SampleBarriers>(B);
    sample_histograms_ = cuda::DeviceBuffer<SampleHistograms>(B);
    sample_slots_ = cuda::DeviceBuffer<SampleSlots>(B);
    p.sample_barriers = sample_barriers_.data();
    p.sample_histograms = sample_histograms_.data();
    p.sample_slots = sample_slots_.data();
  }
  p.abort_flag = watchdog_.device_flag();
  for (Slot& slot : slots_) {
    slot.picks = cuda::DeviceBuffer<int32_t>(B);
    MKSERVE_CUDA_CHECK(cudaEventCreate(&slot.start));
    MKSERVE_CUDA_CHECK(cudaEventCreate(&slot.done));
    MKSERVE_CUDA_CHECK(cudaEventCreateWithFlags(&slot.uploaded_event, cudaEventDisableTiming));
  }
  MKSERVE_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
}

MegakernelDecoder::~MegakernelDecoder() {
  if (copy_stream_ != nullptr) cudaStreamDestroy(copy_stream_);
  for (Slot& slot : slots_) {
    if (slot.done != nullptr) cudaEventDestroy(slot.done);
    if (slot.start != nullptr) cudaEventDestroy(slot.start);
    if (slot.uploaded_event != nullptr) cudaEventDestroy(slot.uploaded_event);
  }
}

MegakernelDecoder::Slot& MegakernelDecoder::SlotAt(int slot) {
  if (slot < 0 || slot > 1) throw Error("megakernel: step slot " + std::to_string(slot));
  return slots_[slot];
}

MegakernelDecoder::Uploaded& MegakernelDecoder::UploadedFor(const Schedule& schedule) {
  auto found = uploaded_.find(&schedule);
  if (found != uploaded_.end()) return *found->second;
  if (schedule.num_sms != num_sms_) {
    throw Error("megakernel: schedule built for " + std::to_string(schedule.num_sms) +
                " SMs, this device has " + std::to_string(num_sms_));
  }
  for (const auto& list : schedule.sm_tasks) {
    for (const TaskDescriptor& task : list) {
      if (!KernelRuns(task.opcode)) {
        throw Error("megakernel: the schedule has opcode " + std::to_string(task.opcode) +
                    ", which the kernel does not run");
      }
    }
  }
  auto up = std::make_unique<Uploaded>();
  up->schedule = &schedule;
  const std::vector<TaskDescriptor> packed = schedule.PackedTasks();
  const std::vector<uint32_t> counts = schedule.TaskCounts();
  up->max_tasks_per_sm = schedule.max_tasks_per_sm();
  up->tasks = cuda::DeviceBuffer<TaskDescriptor>(static_cast<int64_t>(packed.size()));
  MKSERVE_CUDA_CHECK(
      cudaMemcpy(up->tasks.data(), packed.data(), up->tasks.bytes(), cudaMemcpyHostToDevice));
  up->counts = cuda::DeviceBuffer<uint32_t>(static_cast<int64_t>(counts.size()));
  MKSERVE_CUDA_CHECK(
      cudaMemcpy(up->counts.data(), counts.data(), up->counts.bytes(), cudaMemcpyHostToDevice));
  up->counters = cuda::DeviceBuffer<uint32_t>(
      std::max<int64_t>(1, static_cast<int64_t>(schedule.counters.size())));
  const int64_t queues = std::max<int64_t>(1, static_cast<int64_t>(schedule.queues.size()));
  // Every MoE layer writes its expert items over the layer before's, as it does the bucket
  // offsets and assignments: the verifier models all of them as one buffer every layer reuses
  // (Tensor::kExpertQueues) and checks that a finalize writes only after every item of the layer
  // before was read. A layer's gate/up items come first, then its down items. (An array per
  // layer took 48 times the space: 4.3 MB of a 10 MB batch-64 schedule.)
  uint32_t gate_up_items = 0, down_items = 0, attention_items = 0;
  for (const QueueInfo& q : schedule.queues) {
    if (q.kind == QueueKind::kExpertGateUp) gate_up_items = std::max(gate_up_items, q.capacity);
    if (q.kind == QueueKind::kExpertDown) down_items = std::max(down_items, q.capacity);
    if (q.kind == QueueKind::kAttention) attention_items = std::max(attention_items, q.capacity);
  }
  std::vector<uint32_t> offsets(queues, 0);  // the LM head's queue holds no records
  for (size_t q = 0; q < schedule.queues.size(); ++q) {
    if (schedule.queues[q].kind == QueueKind::kExpertDown) offsets[q] = gate_up_items;
  }
  up->queue_offsets = cuda::DeviceBuffer<uint32_t>(queues);
  MKSERVE_CUDA_CHECK(cudaMemcpy(up->queue_offsets.data(), offsets.data(), up->queue_offsets.bytes(),
                                cudaMemcpyHostToDevice));
  up->queue_heads = cuda::DeviceBuffer<uint32_t>(queues);
  up->expert_items =
      cuda::DeviceBuffer<ExpertWorkItem>(std::max<uint32_t>(1, gate_up_items + down_items));
  up->attention_capacity = attention_items;
  Uploaded& stored = *up;
  uploaded_[&schedule] = std::move(up);
  return stored;
}

int64_t MegakernelDecoder::Prepare(std::span<const std::pair<int64_t, int64_t>> steps, int threads,
                                   std::chrono::steady_clock::time_point deadline,
                                   const std::function<void(int64_t, int64_t)>& progress) {
  std::vector<std::pair<int64_t, size_t>> buckets;
  for (const auto& [batch, context] : steps) {
    buckets.emplace_back(batch, cache_.BucketIndexFor(context));
  }
  cache_.BuildMany(buckets, threads, deadline, progress);
  const size_t before = uploaded_.size();
  for (const auto& [batch, bucket_index] : buckets) {
    if (std::chrono::steady_clock::now() >= deadline) break;
    UploadedFor(cache_.Get(batch, bucket_index));
  }
  return static_cast<int64_t>(uploaded_.size() - before);
}

void MegakernelDecoder::Run(const cuda::StepPlan& plan, float* logits, const StepSampling& sampling,
                            cudaStream_t stream, StepFault fault) {
  Start(plan, logits, sampling, stream, 0, {}, fault);
  Finish(0);
}

void MegakernelDecoder::Start(const cuda::StepPlan& plan, float* logits,
                              const StepSampling& sampling, cudaStream_t stream, int slot_index,
                              std::span<const int32_t> pick_rows, StepFault fault) {
  Slot& slot = SlotAt(slot_index);
  if (slot.uploaded != nullptr) {
    throw Error("megakernel: slot " + std::to_string(slot_index) + " still runs a step");
  }
  int64_t longest = 0;
  for (int32_t position : plan.positions) longest = std::max<int64_t>(longest, position + 1);
  Uploaded& up = UploadedFor(cache_.Select(plan.num_sequences, longest));
  const Schedule& schedule = *up.schedule;
  const int64_t B = plan.num_sequences;
  if (plan.num_tokens != B || B < 1 || B > options_.max_batch || schedule.batch != B) {
    throw Error("megakernel: a step of " + std::to_string(B) + " decode rows (" +
                std::to_string(plan.num_tokens) +
                " tokens) does not fit: every row decodes one token, 1.." +
                std::to_string(options_.max_batch) + " rows, schedule batch " +
                std::to_string(schedule.batch));
  }
  const bool samples = samples_in_step();
  const bool sampled_rows =
      samples && sampling.in_step != nullptr && sampling.in_step->staged.count > 0;
  if (sampling.argmax == nullptr) throw Error("megakernel: a step needs an argmax output");
  if (!pick_rows.empty()) {  // rows of the step the other slot ran last
    const int64_t before = slots_[1 - slot_index].batch;
    if (static_cast<int64_t>(pick_rows.size()) != B) {
      throw Error("megakernel: token sources for " + std::to_string(pick_rows.size()) +
                  " rows, the step has " + std::to_string(B));
    }
    for (int32_t row : pick_rows) {
      if (row >= before || row < -1) {
        throw Error("megakernel: a row takes its token from row " + std::to_string(row) +
                    " of the step before, which has " + std::to_string(before));
      }
    }
  }
  if (sampled_rows && static_cast<int64_t>(sampling.in_step->request_of_row.size()) != B) {
    throw Error("megakernel: in-step sampling staged for " +
                std::to_string(sampling.in_step->request_of_row.size()) + " rows, the step has " +
                std::to_string(B));
  }
  // Attention queues' items from the rows' live lengths; expert queues' counts kMoeFinalize sets.
  std::vector<AttentionWorkItem> attention_items;
  bool has_attention_queue = false;
  for (const QueueInfo& q : schedule.queues) has_attention_queue |= q.kind == QueueKind::kAttention;
  if (has_attention_queue) {
    std::vector<int64_t> lengths(plan.positions.begin(), plan.positions.end());
    for (int64_t& length : lengths) length += 1;
    attention_items = AttentionItemsForLengths(config_, lengths, schedule.bucket.max_context_tokens,
                                               schedule.tiles, num_sms_);
    if (attention_items.size() > up.attention_capacity) {
      throw Error("megakernel: " + std::to_string(attention_items.size()) +
                  " attention items exceed the queue capacity " +
                  std::to_string(up.attention_capacity));
    }
  }
  // The step's host data in one upload (StepUpload): tokens, positions, each row's sampling
  // request (with kSample), each KV group's block tables; the layers' parameters; the queue
  // counts; the attention items.
  size_t inputs = 2 * static_cast<size_t>(B) + (samples ? static_cast<size_t>(B) : 0);
  std::vector<size_t> table_at;
  for (const auto& table : plan.block_tables) {
    table_at.push_back(inputs);
    inputs += table.size();
  }
  const size_t queues = std::max<size_t>(1, schedule.queues.size());
  slot.upload.Begin();
  const size_t inputs_at = slot.upload.Reserve(inputs * sizeof(int32_t));
  const size_t layers_at = slot.upload.Reserve(layers_.size() * sizeof(LayerParams));
  const size_t counts_at = slot.upload.Reserve(queues * sizeof(uint32_t));
  const size_t items_at = slot.upload.Reserve(attention_items.size() * sizeof(AttentionWorkItem));
  slot.upload.Allocate(stream);
  int32_t* host_inputs = slot.upload.Host<int32_t>(inputs_at);
  const int32_t* base = slot.upload.Device<int32_t>(inputs_at);
  std::copy(plan.token_ids.begin(), plan.token_ids.end(), host_inputs);
  std::copy(plan.positions.begin(), plan.positions.end(), host_inputs + B);
  if (sampled_rows) {
    std::copy(sampling.in_step->request_of_row.begin(), sampling.in_step->request_of_row.end(),
              host_inputs + 2 * B);
  } else if (samples) {
    std::fill_n(host_inputs + 2 * B, B, -1);
  }
  for (size_t g = 0; g < plan.block_tables.size(); ++g) {
    std::copy(plan.block_tables[g].begin(), plan.block_tables[g].end(), host_inputs + table_at[g]);
  }
  LayerParams* host_layers = slot.upload.Host<LayerParams>(layers_at);
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const int32_t group = group_of_layer_[l];  // KvLayout order, as the plan's tables
    host_layers[l] = layers_[l];
    host_layers[l].block_tables = base + table_at[group];
    host_layers[l].max_pages = static_cast<int32_t>(plan.max_pages[group]);
  }
  uint32_t* host_counts = slot.upload.Host<uint32_t>(counts_at);
  std::fill_n(host_counts, queues, 0u);
  for (size_t q = 0; q < schedule.queues.size(); ++q) {
    if (schedule.queues[q].kind == QueueKind::kAttention) {
      host_counts[q] = static_cast<uint32_t>(attention_items.size());
    }
  }
  std::copy(attention_items.begin(), attention_items.end(),
            slot.upload.Host<AttentionWorkItem>(items_at));
  // With the other slot's step still running, the copy goes on the copy stream and overlaps it
  // (this slot's device buffer is free: its last step finished); the step waits for it.
  if (slots_[1 - slot_index].uploaded != nullptr) {
    slot.upload.Send(copy_stream_);
    MKSERVE_CUDA_CHECK(cudaEventRecord(slot.uploaded_event, copy_stream_));
    MKSERVE_CUDA_CHECK(cudaStreamWaitEvent(stream, slot.uploaded_event));
  } else {
    slot.upload.Send(stream);
  }

  StepParams p = base_;
  p.batch = static_cast<int32_t>(B);
  const TileShapes& t = schedule.tiles;
  // Designated: a field added to TileWidths cannot take another's value by position (one
  // that did made the down projections zero-width: 10-18 % "faster" and wrong).
  p.tiles = TileWidths{.qkv = static_cast<int32_t>(t.qkv_tile),
                       .oproj = static_cast<int32_t>(t.oproj_tile),
                       .dense_up = static_cast<int32_t>(t.dense_up_tile),
                       .dense_down = static_cast<int32_t>(t.dense_down_tile),
                       .router = static_cast<int32_t>(t.router_tile),
                       .lm_head = static_cast<int32_t>(t.lm_head_tile),
                       .expert_up = static_cast<int32_t>(t.expert_up_tile),
                       .expert_down = static_cast<int32_t>(t.expert_down_tile),
                       .expert_rows = static_cast<int32_t>(t.expert_rows)};
  if (t.pick_items != 0) p.bucket_assignment = p.routed_position = pick_identity_.data();
  p.layers = slot.upload.Device<LayerParams>(layers_at);
  p.token_ids = base;
  p.positions = base + B;
  p.logits = logits;
  if (samples) {
    p.sample_request = base + 2 * B;
    p.argmax_out = sampling.argmax;
    p.picks_out = slot.picks.data();
    if (sampled_rows) p.staged = sampling.in_step->staged;
  }
  p.expert_items = up.expert_items.data();
  p.attention_items = slot.upload.Device<AttentionWorkItem>(items_at);
  p.queue_offsets = up.queue_offsets.data();
  p.queue_counts = slot.upload.Device<uint32_t>(counts_at);
  p.queue_heads = up.queue_heads.data();
  p.counters = up.counters.data();
  p.routing = routing_.data();
  int64_t records = 0, item_records = 0;
  if (options_.record_timeline) {
    records = static_cast<int64_t>(num_sms_) * up.max_tasks_per_sm;
    if (timeline_.count() < records) timeline_ = cuda::DeviceBuffer<TaskTimestamp>(records);
    p.timeline = timeline_.data();
    p.item_stride = ItemTimelineStride(schedule);
    item_records = static_cast<int64_t>(schedule.queues.size()) * p.item_stride;
    if (item_timeline_.count() < std::max<int64_t>(1, item_records)) {
      item_timeline_ = cuda::DeviceBuffer<ItemTimestamp>(std::max<int64_t>(1, item_records));
    }
    p.item_timeline = item_timeline_.data();
  }
  // The schedule says which scratch its tasks add into (Schedule::zero_before_step); the rest is
  // the decoder's own: the timelines, the counters and the abort flag.
  std::vector<ZeroRegion> zero = {
      {p.timeline, records * static_cast<int64_t>(sizeof(TaskTimestamp) / sizeof(uint32_t))},
      {p.item_timeline,
       item_records * static_cast<int64_t>(sizeof(ItemTimestamp) / sizeof(uint32_t))},
      {up.counters.data(), up.counters.count()},
      {p.aborted, 1},
  };
  if (samples) {  // the meetings' arrivals; the histograms only where a row samples
    zero.push_back({p.sample_barriers, B * static_cast<int64_t>(sizeof(SampleBarriers) / 4)});
    if (sampled_rows) {
      zero.push_back({p.sample_histograms, B * static_cast<int64_t>(sizeof(SampleHistograms) / 4)});
    }
  }
  void* const buffers[kScratchBufferCount] = {
      p.attn_out,       p.ffn_out, p.router_logits, p.expert_counts, up.queue_heads.data(),
      p.published_picks};
  for (const ScratchToZero& scratch : schedule.zero_before_step) {
    zero.push_back(
        {buffers[scratch.buffer], static_cast<int64_t>(scratch.bytes / sizeof(uint32_t))});
  }
  TaskLists lists{up.tasks.data(), up.counts.data(), num_sms_,
                  static_cast<int32_t>(up.max_tasks_per_sm)};
  // Rows whose token the step before (the other slot's) picked on the device: the prepare
  // kernel copies it from that slot's picks over the uploaded one, after the upload's copy.
  std::optional<TokenGather> gather;
  if (!pick_rows.empty()) {
    gather.emplace();
    gather->tokens = slot.upload.Device<int32_t>(inputs_at);
    gather->picks = slots_[1 - slot_index].picks.data();
    gather->rows = static_cast<int32_t>(B);
    std::copy(pick_rows.begin(), pick_rows.end(), gather->pick_row);
  }
  // The planted fault: SM 0's first descriptor (packed first) waits for counter 0 to reach a
  // count it never gets, for this step only; the schedule's own descriptor goes back afterwards.
  const bool stuck = fault == StepFault::kStuckWait;
  if (stuck) {
    if (schedule.sm_tasks.front().empty()) throw Error("megakernel: SM 0 has no task to stall");
    TaskDescriptor stalled = schedule.sm_tasks.front().front();
    stalled.wait0_counter = 0;
    stalled.wait0_target = 0xFFFFFFFFu;
    MKSERVE_CUDA_CHECK(cudaMemcpyAsync(up.tasks.data(), &stalled, sizeof(stalled),
                                       cudaMemcpyHostToDevice, stream));
  }
  watchdog_.Arm();
  MKSERVE_CUDA_CHECK(cudaEventRecord(slot.start, stream));
  PrepareStep(zero, gather ? &*gather : nullptr, stream);
  LaunchMegakernel(p, lists, stream);
  // The argmax kernel, when there is one, before the done event: Finish returns with nothing of
  // the step left on the stream. Its rows are the step's picks too.
  if (!samples) {
    cuda::ArgmaxRows(logits, B, config_.vocab_size, sampling.argmax, stream);
    MKSERVE_CUDA_CHECK(cudaMemcpyAsync(slot.picks.data(), sampling.argmax, B * sizeof(int32_t),
                                       cudaMemcpyDefault, stream));
  }
  MKSERVE_CUDA_CHECK(cudaEventRecord(slot.done, stream));
  last_schedule_ = &schedule;
  last_batch_ = B;
  slot.uploaded = &up;
  slot.batch = B;
  slot.stuck = stuck;
}

void MegakernelDecoder::Finish(int slot_index) {
  Slot& slot = SlotAt(slot_index);
  if (slot.uploaded == nullptr) {
    throw Error("megakernel: no step to finish on slot " + std::to_string(slot_index));
  }
  Uploaded& up = *std::exchange(slot.uploaded, nullptr);
  const Schedule& schedule = *up.schedule;
  try {
    watchdog_.Wait(slot.done, options_.watchdog, up.counters.data(), schedule.counters,
                   "megakernel: the decode step of " + std::to_string(slot.batch) + " rows");
  } catch (...) {
    if (slot.stuck) {
      MKSERVE_CUDA_CHECK(cudaMemcpy(up.tasks.data(), &schedule.sm_tasks.front().front(),
                                    sizeof(TaskDescriptor), cudaMemcpyHostToDevice));
    }
    throw;
  }
  if (slot.stuck)
    throw Error("megakernel: a step with a stuck wait finished");  // the watchdog must end it
  MKSERVE_CUDA_CHECK(cudaEventElapsedTime(&last_step_ms_, slot.start, slot.done));
}

std::vector<ItemTimestamp> MegakernelDecoder::LastItemTimeline() const {
  if (!options_.record_timeline || last_schedule_ == nullptr) return {};
  std::vector<ItemTimestamp> records(last_schedule_->queues.size() *
                                     ItemTimelineStride(*last_schedule_));
  if (records.empty()) return records;
  MKSERVE_CUDA_CHECK(cudaMemcpy(records.data(), item_timeline_.data(),
                                records.size() * sizeof(ItemTimestamp), cudaMemcpyDeviceToHost));
  return records;
}

std::vector<int32_t> MegakernelDecoder::LastRouting() const {
  if (!options_.record_routing || last_batch_ == 0) return {};
  return MoeLayerBlocks(config_, routing_.data(), last_batch_ * config_.num_experts_per_token);
}

std::vector<float> MegakernelDecoder::LastRouterLogits() const {
  if (!options_.record_routing || last_batch_ == 0) return {};
  return MoeLayerBlocks<float>(config_, base_.router_logits, last_batch_ * config_.num_experts);
}

std::vector<TaskTimestamp> MegakernelDecoder::LastTimeline() const {
  if (!options_.record_timeline || last_schedule_ == nullptr) return {};
  std::vector<TaskTimestamp> records(num_sms_ * last_schedule_->max_tasks_per_sm());
  MKSERVE_CUDA_CHECK(cudaMemcpy(records.data(), timeline_.data(),
                                records.size() * sizeof(TaskTimestamp), cudaMemcpyDeviceToHost));
  return records;
}

}  // namespace mkserve::megakernel
