#include "megakernel/schedule/verifier.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <numeric>
#include <queue>
#include <random>
#include <sstream>
#include <tuple>
#include <unordered_set>

#include "common/error.h"
#include "engine/kv_layout.h"
#include "megakernel/schedule/opcode_names.h"
#include "megakernel/schedule/task_access.h"
#include "megakernel/schedule/work_queues.h"

namespace mkserve::megakernel {

namespace {

constexpr int kReportedPerKind = 4;
constexpr int kMaxWaits = 3;  // a task's two, or a claim's waits plus its item's own
using WaitSet = std::array<uint32_t, kMaxWaits>;

Wave WaveOf(uint32_t opcode) {
  switch (opcode) {
    case kEmbed:
      return Wave::kEmbed;
    case kJoin:
      return Wave::kJoin;
    case kQkv:
      return Wave::kQkv;
    case kAttention:
    case kAttentionClaim:
      return Wave::kAttention;
    case kAttentionCombine:
      return Wave::kAttentionCombine;
    case kOProj:
      return Wave::kOProj;
    case kDenseGateUp:
      return Wave::kDenseGateUp;
    case kDenseDown:
      return Wave::kDenseDown;
    case kRouter:
      return Wave::kRouter;
    case kTopK:
      return Wave::kTopK;
    case kMoeFinalize:
      return Wave::kMoeFinalize;
    case kExpertGateUpClaim:
      return Wave::kExpertGateUp;
    case kExpertDownClaim:
      return Wave::kExpertDown;
    case kMoeCombine:
      return Wave::kMoeCombine;
    case kLmHead:
    case kLmHeadClaim:
      return Wave::kLmHead;
    case kSample:
      return Wave::kSample;
    default:
      return Wave::kCount;
  }
}

struct Signal {
  uint32_t counter;
  uint32_t weight;
};

// A static task or a claimed work item.
struct Node {
  const TaskDescriptor* task = nullptr;  // items: their queue's first claimer
  int32_t sm = -1;                       // static tasks: where and at which list position
  int32_t index = -1;
  int32_t queue = -1;  // items: their queue and position in it
  int32_t item = -1;
  uint32_t first_sequence = 0;  // items: the earliest and latest claimer of their queue
  uint32_t last_sequence = 0;
  int num_waits = 0;
  WaitSet wait_counter{kNoCounter, kNoCounter, kNoCounter};
  std::array<uint32_t, kMaxWaits> wait_target{};
  uint32_t signal_begin = 0, signal_end = 0;
  bool valid = true;  // descriptor passed the checks; invalid ones are not modelled further
};

struct AccessRecord {
  Access access;
  int32_t node;
};

struct AncestorQuery {
  uint64_t sort_key;  // the descendant's wait set id, then the ancestor's order, latest first
  int32_t descendant;
  int32_t ancestor;
  VerifyFailureKind kind;
  int32_t access;  // the read (or later write) it is about, for the message
};

class Verifier {
 public:
  Verifier(const ModelConfig& config, const Schedule& schedule, const RunTimeWork& work,
           VerifyChecks checks)
      : config_(config), schedule_(schedule), work_(work), checks_(checks) {}

  VerifyReport Run() {
    if (!CheckQueuesAndTasks()) return Finish();
    BuildItems();
    CheckCounters();
    CheckOrder();
    CheckAttentionPages();
    CheckSampleTeams();
    if (Simulate() && checks_ == VerifyChecks::kAll) CheckData();
    return Finish();
  }

 private:
  void Fail(VerifyFailureKind kind, const std::string& message) {
    ++report_.failure_count;
    if (++reported_[static_cast<int>(kind)] <= kReportedPerKind) {
      report_.failures.push_back({kind, message});
    }
  }

  VerifyReport Finish() {
    report_.nodes = static_cast<int64_t>(nodes_.size());
    return std::move(report_);
  }

  bool ValidCounter(uint32_t id) const {
    return id == kNoCounter || id < schedule_.counters.size();
  }

  std::string DescribeCounter(uint32_t id) const {
    if (id == kNoCounter || id >= schedule_.counters.size()) return "counter " + std::to_string(id);
    const CounterInfo& info = schedule_.counters[id];
    return "counter " + std::to_string(id) + " (" + std::string(WaveName(info.producer)) + " L" +
           std::to_string(info.layer) + " unit " + std::to_string(info.unit) + ")";
  }

  std::string Describe(int32_t id) const {
    const Node& node = nodes_[id];
    const TaskDescriptor& t = *node.task;
    std::ostringstream out;
    if (node.sm >= 0) {
      out << "SM " << node.sm << " task " << node.index << " [" << OpcodeName(t.opcode) << " L"
          << t.layer << " tile " << t.tile << " split " << t.split << " rows " << t.row_begin
          << ".." << t.row_end << " seq " << t.arg[kArgSequence];
      if (t.opcode == kSample) out << " rank " << t.arg[kArgTeamRank] << "/" << t.arg[kArgTeamSize];
      out << "]";
    } else {
      out << "item " << node.item << " of queue " << node.queue << " [" << OpcodeName(t.opcode)
          << " L" << t.layer << "]";
    }
    return out.str();
  }

  // Descriptors, counter ids and queues; makes one node per static task.
  bool CheckQueuesAndTasks() {
    bool counters_ok = true;
    size_t total = 0;
    for (const auto& list : schedule_.sm_tasks) {
      sm_first_.push_back(static_cast<int32_t>(total));
      total += list.size();
    }
    nodes_.reserve(total * 2);
    claimers_.assign(schedule_.queues.size(), {});
    for (size_t sm = 0; sm < schedule_.sm_tasks.size(); ++sm) {
      for (size_t i = 0; i < schedule_.sm_tasks[sm].size(); ++i) {
        const TaskDescriptor& task = schedule_.sm_tasks[sm][i];
        Node node;
        node.task = &task;
        node.sm = static_cast<int32_t>(sm);
        node.index = static_cast<int32_t>(i);
        node.first_sequence = node.last_sequence = task.arg[kArgSequence];
        const int32_t id = static_cast<int32_t>(nodes_.size());
        nodes_.push_back(node);
        const std::string problem = DescriptorProblem(task);
        if (!problem.empty()) {
          Fail(VerifyFailureKind::kBadDescriptor, Describe(id) + ": " + problem);
          nodes_[id].valid = false;
        }
        std::vector<uint32_t> named = {task.wait0_counter, task.wait1_counter, task.signal_counter};
        if (IsClaimOpcode(task.opcode)) {
          named.push_back(task.arg[kArgItemWaitBase]);
          named.push_back(task.arg[kArgItemSignalBase]);
        }
        for (uint32_t counter : named) {
          if (!ValidCounter(counter)) {
            Fail(VerifyFailureKind::kUnknownCounter, Describe(id) + " names counter " +
                                                         std::to_string(counter) + " of " +
                                                         std::to_string(schedule_.counters.size()));
            counters_ok = false;
          }
        }
        for (int w = 0; w < 2; ++w) {
          const uint32_t counter = w == 0 ? task.wait0_counter : task.wait1_counter;
          if (counter == kNoCounter) continue;
          nodes_[id].wait_counter[nodes_[id].num_waits] = counter;
          nodes_[id].wait_target[nodes_[id].num_waits++] =
              w == 0 ? task.wait0_target : task.wait1_target;
        }
        nodes_[id].signal_begin = static_cast<uint32_t>(signals_.size());
        if (task.signal_counter != kNoCounter) signals_.push_back({task.signal_counter, 1});
        nodes_[id].signal_end = static_cast<uint32_t>(signals_.size());
        if (IsClaimOpcode(task.opcode) && nodes_[id].valid) {
          claimers_[task.arg[kArgQueue]].push_back(id);
        }
      }
    }
    for (size_t q = 0; q < claimers_.size(); ++q) {
      for (int32_t id : claimers_[q]) {
        const TaskDescriptor& a = *nodes_[claimers_[q][0]].task;
        const TaskDescriptor& b = *nodes_[id].task;
        TaskDescriptor a_copy = a, b_copy = b;
        a_copy.arg[kArgSequence] = b_copy.arg[kArgSequence] = 0;
        a_copy.arg[kArgMaxItems] = b_copy.arg[kArgMaxItems] = 0;
        if (std::memcmp(&a_copy, &b_copy, sizeof(TaskDescriptor)) != 0) {
          Fail(VerifyFailureKind::kBadDescriptor,
               Describe(id) + " differs from the first claimer of queue " + std::to_string(q) +
                   ": claimers of one queue must be identical but for kArgMaxItems");
        }
      }
    }
    return counters_ok;
  }

  // Empty when the descriptor is well formed.
  std::string DescriptorProblem(const TaskDescriptor& task) const {
    const int64_t layers = config_.num_layers;
    if (task.opcode == kNop || task.opcode >= kOpcodeCount) {
      return "opcode " + std::to_string(task.opcode) + " is not a step op";
    }
    const bool final_op =
        task.opcode == kLmHead || task.opcode == kLmHeadClaim || task.opcode == kSample;
    if (final_op ? task.layer != layers : task.layer >= layers) {
      return "layer " + std::to_string(task.layer) + " is out of range";
    }
    if (task.row_begin >= task.row_end || task.row_end > schedule_.batch) {
      return "rows " + std::to_string(task.row_begin) + ".." + std::to_string(task.row_end) +
             " are not a non-empty range inside the batch of " + std::to_string(schedule_.batch);
    }
    const LayerSpec* spec = final_op ? nullptr : &config_.layers[task.layer];
    const bool moe = spec && spec->ffn == FfnKind::kMoe;
    switch (task.opcode) {
      case kAttention:
      case kAttentionCombine:
      case kQkv:
        if (task.arg[kArgKvHead] >= config_.num_kv_heads) return "KV head out of range";
        if (task.opcode != kQkv && task.arg[kArgSplits] == 0) return "zero split slots";
        break;
      case kDenseGateUp:
      case kDenseDown:
        if (moe) return "a dense FFN op in an MoE layer";
        break;
      case kRouter:
      case kTopK:
      case kMoeFinalize:
      case kMoeCombine:
        if (!moe) return "an MoE op in a dense layer";
        break;
      default:
        break;
    }
    if (IsClaimOpcode(task.opcode) || task.opcode == kMoeFinalize) {
      std::vector<std::pair<uint32_t, QueueKind>> named;
      switch (task.opcode) {
        case kAttentionClaim:
          named = {{task.arg[kArgQueue], QueueKind::kAttention}};
          break;
        case kExpertGateUpClaim:
          named = {{task.arg[kArgQueue], QueueKind::kExpertGateUp}};
          break;
        case kExpertDownClaim:
          named = {{task.arg[kArgQueue], QueueKind::kExpertDown}};
          break;
        case kLmHeadClaim:
          named = {{task.arg[kArgQueue], QueueKind::kLmHead}};
          break;
        default:
          named = {{task.arg[kArgQueue], QueueKind::kExpertGateUp},
                   {task.arg[kArgQueue2], QueueKind::kExpertDown}};
      }
      for (const auto& [q, kind] : named) {
        if (q >= schedule_.queues.size()) return "queue " + std::to_string(q) + " does not exist";
        if (schedule_.queues[q].layer != static_cast<int32_t>(task.layer)) {
          return "queue " + std::to_string(q) + " belongs to another layer";
        }
        if (schedule_.queues[q].kind != kind) {
          return "queue " + std::to_string(q) + " is of another kind";
        }
      }
      if (task.opcode == kAttentionClaim && spec->attention != AttentionKind::kFull) {
        return "claims attention work in a sliding layer";
      }
      if ((task.opcode == kExpertGateUpClaim || task.opcode == kExpertDownClaim) && !moe) {
        return "claims expert work in a dense layer";
      }
      if (task.opcode == kLmHeadClaim) {  // the kernel runs every item it counts
        const uint64_t end = task.arg[kArgOutBegin] + static_cast<uint64_t>(task.arg[kArgTiles]) *
                                                          schedule_.tiles.lm_head_tile;
        if (end > static_cast<uint64_t>(config_.vocab_size)) {
          return "claims LM head tiles up to feature " + std::to_string(end) + " of " +
                 std::to_string(config_.vocab_size);
        }
      }
    }
    // A bounded claim may end with items left, so only where an item can never hold it up (the
    // simulation lets bounded claims take nothing; see Simulate).
    if (task.arg[kArgMaxItems] != 0 &&
        (task.opcode != kExpertGateUpClaim || task.arg[kArgItemWaitBase] != kNoCounter)) {
      return "kArgMaxItems on a task that is not a gate/up claim whose items never wait";
    }
    if ((task.flags & kFlagPrimeWeights) != 0) {  // copied blind, before the wait
      const bool gemm_tile = task.opcode == kQkv || task.opcode == kLmHead;
      if (!gemm_tile && task.opcode != kRouter) {
        return "kFlagPrimeWeights on a task that is not a router's, a QKV or LM head tile";
      }
      const uint32_t rows = task.row_end - task.row_begin;
      if (gemm_tile && rows > kMaxPrimedTileRows) {  // the ring body's tiles only
        return "primes a " + std::string(OpcodeName(task.opcode)) + " tile of " +
               std::to_string(rows) + " rows, at most " + std::to_string(kMaxPrimedTileRows);
      }
      const uint64_t router_bytes =  // the slice lies in the weight ring
          static_cast<uint64_t>(schedule_.tiles.router_tile) * (task.k_end - task.k_begin) * 2;
      if (task.opcode == kRouter && router_bytes > kMaxPrimedRouterBytes) {
        return "primes a router slice of " + std::to_string(router_bytes) + " bytes, at most " +
               std::to_string(kMaxPrimedRouterBytes);
      }
    }
    return ValidatePickItems(task);
  }

  // By pick (tiles.pick_items) the claims build their items from descriptor fields, so those must
  // say what ExpertItemsForRouting assumes; no finalize may run, and where the claims run the
  // top-k (TopKInClaimsAt) no top-k task either, the claims flagged.
  std::string ValidatePickItems(const TaskDescriptor& task) const {
    const bool by_pick = schedule_.tiles.pick_items != 0;
    const bool in_claims = TopKInClaimsAt(schedule_.tiles, schedule_.batch);
    const bool flagged = (task.flags & kFlagPickItems) != 0;
    const bool routes = (task.flags & kFlagTopKInClaims) != 0;
    if (routes && task.opcode != kExpertGateUpClaim && task.opcode != kExpertDownClaim) {
      return "kFlagTopKInClaims on a task that is not an expert claim";
    }
    if (task.opcode == kTopK && in_claims) return "a top-k task in a schedule whose claims route";
    if (routes && task.row_end - task.row_begin > kMaxTopKInClaimsBatch) {  // the kernel's picks
      return "runs the top-k in a claim of more than " + std::to_string(kMaxTopKInClaimsBatch) +
             " rows";
    }
    const uint32_t up_tiles = ExpertGateUpTiles(config_, schedule_.tiles);
    const uint32_t down_tiles = ExpertDownTiles(config_, schedule_.tiles);
    switch (task.opcode) {
      case kTopK:
      case kExpertGateUpClaim:
      case kExpertDownClaim:
        if (flagged != by_pick) {
          return by_pick ? "lacks kFlagPickItems in a schedule by pick"
                         : "has kFlagPickItems in a schedule with a finalize";
        }
        if (task.opcode != kTopK && routes != in_claims) {
          return in_claims ? "lacks kFlagTopKInClaims in a schedule whose claims route"
                           : "has kFlagTopKInClaims in a schedule with a top-k task";
        }
        break;
      case kMoeFinalize:
        if (by_pick) return "a finalize in a schedule by pick";
        return "";
      default:
        return "";
    }
    if (!by_pick || task.opcode == kTopK) return "";
    const bool down = task.opcode == kExpertDownClaim;
    if (task.arg[kArgTiles] != (down ? down_tiles : up_tiles)) {
      return "claims by pick with " + std::to_string(task.arg[kArgTiles]) +
             " tiles per pick, the queue has " + std::to_string(down ? down_tiles : up_tiles);
    }
    if (down && task.arg[kArgTiles2] != up_tiles) {
      return "down claims by pick wait for " + std::to_string(task.arg[kArgTiles2]) +
             " gate/up tiles, a pick has " + std::to_string(up_tiles);
    }
    return "";
  }

  // The instance's queue items as nodes.
  void BuildItems() {
    if (static_cast<int64_t>(work_.live_lengths.size()) != schedule_.batch) {
      throw Error("run-time work has " + std::to_string(work_.live_lengths.size()) +
                  " live lengths for a batch of " + std::to_string(schedule_.batch));
    }
    if (static_cast<int64_t>(work_.routing.size()) != config_.num_layers) {
      throw Error("run-time work has routing for " + std::to_string(work_.routing.size()) +
                  " layers, the model has " + std::to_string(config_.num_layers));
    }
    attention_items_ =
        AttentionItemsForLengths(config_, work_.live_lengths, schedule_.bucket.max_context_tokens,
                                 schedule_.tiles, schedule_.num_sms);
    expert_queues_.resize(config_.num_layers);
    for (int64_t l = 0; l < config_.num_layers; ++l) {
      if (config_.layers[l].ffn == FfnKind::kMoe) {
        expert_queues_[l] =
            ExpertItemsForRouting(config_, schedule_.batch, work_.routing[l], schedule_.tiles);
      }
    }
    queue_items_.assign(schedule_.queues.size(), {});
    for (size_t q = 0; q < schedule_.queues.size(); ++q) {
      const QueueInfo& queue = schedule_.queues[q];
      size_t count = 0;
      switch (queue.kind) {
        case QueueKind::kAttention:
          count = attention_items_.size();
          break;
        case QueueKind::kExpertGateUp:
          count = expert_queues_.at(queue.layer).gate_up.size();
          break;
        case QueueKind::kExpertDown:
          count = expert_queues_.at(queue.layer).down.size();
          break;
        case QueueKind::kLmHead:  // its claimers, identical, name the count
          count = claimers_[q].empty() ? 0 : nodes_[claimers_[q][0]].task->arg[kArgTiles];
          break;
      }
      if (count > queue.capacity) {
        Fail(VerifyFailureKind::kQueueOverflow,
             "queue " + std::to_string(q) + " (layer " + std::to_string(queue.layer) + ") gets " +
                 std::to_string(count) + " items, its capacity is " +
                 std::to_string(queue.capacity));
      }
      const bool unbounded = std::any_of(claimers_[q].begin(), claimers_[q].end(), [&](int32_t id) {
        return nodes_[id].task->arg[kArgMaxItems] == 0;
      });
      if (count > 0 && !unbounded) {
        Fail(VerifyFailureKind::kBadDescriptor,
             "queue " + std::to_string(q) + " has " + std::to_string(count) +
                 " items and no claim task without an item limit");
        continue;
      }
      if (claimers_[q].empty()) continue;
      const Node claimer = nodes_[claimers_[q][0]];  // a copy: nodes_ grows below
      const TaskDescriptor& claim = *claimer.task;
      uint32_t first = UINT32_MAX, last = 0;
      for (int32_t id : claimers_[q]) {
        first = std::min(first, nodes_[id].first_sequence);
        last = std::max(last, nodes_[id].last_sequence);
      }
      for (size_t i = 0; i < count; ++i) {
        Node node;
        node.task = &claim;
        node.queue = static_cast<int32_t>(q);
        node.item = static_cast<int32_t>(i);
        node.first_sequence = first;
        node.last_sequence = last;
        node.num_waits = claimer.num_waits;
        node.wait_counter = claimer.wait_counter;
        node.wait_target = claimer.wait_target;
        uint32_t wait_unit = kNoCounter, wait_target = 0;
        node.signal_begin = static_cast<uint32_t>(signals_.size());
        const uint32_t signal_base = claim.arg[kArgItemSignalBase];
        if (queue.kind == QueueKind::kLmHead) {  // no wait; one arrival when the step samples
          if (signal_base != kNoCounter) AddItemSignal(signal_base, 0, 1);
        } else if (queue.kind == QueueKind::kAttention) {
          const AttentionWorkItem& item = attention_items_[i];
          wait_unit = item.wait_unit;
          wait_target = item.wait_target;
          AddItemSignal(signal_base, item.signal_unit, item.arrive_weight);
        } else {
          const ExpertQueues& eq = expert_queues_[queue.layer];
          const bool down = queue.kind == QueueKind::kExpertDown;
          const ExpertWorkItem& item = down ? eq.down[i] : eq.gate_up[i];
          wait_unit = item.wait_unit;
          wait_target = item.wait_target;
          if (!down) {
            AddItemSignal(signal_base, item.signal_unit, item.arrive_weight);
          } else {
            for (uint32_t r = 0; r < item.row_count; ++r) {
              AddItemSignal(signal_base, eq.routed_row[item.bucket_begin + r], item.arrive_weight);
            }
          }
        }
        node.signal_end = static_cast<uint32_t>(signals_.size());
        const uint32_t wait_base = claim.arg[kArgItemWaitBase];
        if (wait_base != kNoCounter && wait_unit != kNoCounter) {
          const uint64_t counter = static_cast<uint64_t>(wait_base) + wait_unit;
          if (counter >= schedule_.counters.size()) {
            Fail(VerifyFailureKind::kUnknownCounter,
                 "an item of queue " + std::to_string(q) + " waits on counter " +
                     std::to_string(counter) + " of " + std::to_string(schedule_.counters.size()));
            node.valid = false;
          } else {
            node.wait_counter[node.num_waits] = static_cast<uint32_t>(counter);
            node.wait_target[node.num_waits++] = wait_target;
          }
        }
        queue_items_[q].push_back(static_cast<int32_t>(nodes_.size()));
        nodes_.push_back(node);
      }
    }
  }

  void AddItemSignal(uint32_t base, uint32_t unit, uint32_t weight) {
    const uint64_t counter = static_cast<uint64_t>(base) + unit;
    if (base == kNoCounter || unit == kNoCounter || counter >= schedule_.counters.size()) {
      Fail(VerifyFailureKind::kUnknownCounter,
           "a work item signals counter base " + std::to_string(base) + " + unit " +
               std::to_string(unit) + ", outside the " + std::to_string(schedule_.counters.size()) +
               " counters");
      return;
    }
    signals_.push_back({static_cast<uint32_t>(counter), weight});
  }

  void CheckCounters() {
    const size_t count = schedule_.counters.size();
    arrivals_.assign(count, 0);
    // Arrivers of each counter, as a compressed table.
    arriver_begin_.assign(count + 1, 0);
    for (const Node& node : nodes_) {
      for (uint32_t s = node.signal_begin; s < node.signal_end; ++s) {
        ++arriver_begin_[signals_[s].counter + 1];
      }
    }
    std::partial_sum(arriver_begin_.begin(), arriver_begin_.end(), arriver_begin_.begin());
    arrivers_.assign(arriver_begin_.back(), 0);
    std::vector<uint32_t> fill(arriver_begin_.begin(), arriver_begin_.end() - 1);
    for (size_t id = 0; id < nodes_.size(); ++id) {
      const Node& node = nodes_[id];
      for (uint32_t s = node.signal_begin; s < node.signal_end; ++s) {
        const Signal& signal = signals_[s];
        arrivals_[signal.counter] += signal.weight;
        arrivers_[fill[signal.counter]++] = static_cast<int32_t>(id);
        const CounterInfo& info = schedule_.counters[signal.counter];
        const Wave wave = WaveOf(node.task->opcode);
        const int32_t layer = static_cast<int32_t>(node.task->layer);
        const bool producer = wave == info.producer && layer == info.layer;
        const bool previous_join =
            info.joined_by_previous_layer && wave == Wave::kJoin && layer + 1 == info.layer;
        if (!producer && !previous_join) {
          Fail(VerifyFailureKind::kCounterReused, Describe(static_cast<int32_t>(id)) + " signals " +
                                                      DescribeCounter(signal.counter) +
                                                      ", which belongs to another wave or layer");
        }
      }
    }

    std::vector<int64_t> target(count, -1);
    for (size_t id = 0; id < nodes_.size(); ++id) {
      const Node& node = nodes_[id];
      for (int w = 0; w < node.num_waits; ++w) {
        const uint32_t c = node.wait_counter[w];
        if (target[c] >= 0 && target[c] != node.wait_target[w]) {
          Fail(VerifyFailureKind::kWaitersDisagree,
               Describe(static_cast<int32_t>(id)) + " waits for " + DescribeCounter(c) +
                   " to reach " + std::to_string(node.wait_target[w]) + ", another waiter for " +
                   std::to_string(target[c]));
        }
        target[c] = std::max<int64_t>(target[c], node.wait_target[w]);
      }
    }
    for (size_t c = 0; c < count; ++c) {
      const CounterInfo& info = schedule_.counters[c];
      const uint64_t got = arrivals_[c];
      const std::string name = DescribeCounter(static_cast<uint32_t>(c));
      if (target[c] >= 0) {
        if (static_cast<uint64_t>(target[c]) > got) {
          Fail(VerifyFailureKind::kUnreachableTarget,
               name + " is waited on to reach " + std::to_string(target[c]) + " but only " +
                   std::to_string(got) + " arrivals exist: the wait hangs");
        } else if (static_cast<uint64_t>(target[c]) < got) {
          Fail(VerifyFailureKind::kOverArrival, name + " gets " + std::to_string(got) +
                                                    " arrivals, its waiters expect " +
                                                    std::to_string(target[c]));
        }
      } else if (got > 0) {
        Fail(VerifyFailureKind::kArrivalsWithoutWaiter,
             name + " gets " + std::to_string(got) + " arrivals and nobody waits on it");
      }
      const bool used = got > 0 || target[c] >= 0;
      if (info.fed_by_claims ? used && got != info.expected_arrivals
                             : got != info.expected_arrivals) {
        Fail(VerifyFailureKind::kArrivalMismatch, name + " gets " + std::to_string(got) +
                                                      " arrivals, the counter table says " +
                                                      std::to_string(info.expected_arrivals));
      }
    }
  }

  void CheckOrder() {
    for (const auto& list : schedule_.sm_tasks) {
      for (size_t i = 1; i < list.size(); ++i) {
        if (list[i].arg[kArgSequence] <= list[i - 1].arg[kArgSequence]) {
          Fail(VerifyFailureKind::kOrderViolation,
               "an SM lists sequence " + std::to_string(list[i].arg[kArgSequence]) + " after " +
                   std::to_string(list[i - 1].arg[kArgSequence]));
        }
      }
    }
    // Per counter: its latest producer in the order, and its static producers by (SM, index).
    const size_t count = schedule_.counters.size();
    std::vector<int32_t> latest(count, -1);
    std::vector<std::array<int32_t, 3>> placed;  // (counter, sm, index) of static producers
    for (size_t c = 0; c < count; ++c) {
      for (uint32_t a = arriver_begin_[c]; a < arriver_begin_[c + 1]; ++a) {
        const int32_t n = arrivers_[a];
        if (latest[c] < 0 || nodes_[n].last_sequence > nodes_[latest[c]].last_sequence) {
          latest[c] = n;
        }
        if (nodes_[n].sm >= 0) {
          placed.push_back({static_cast<int32_t>(c), nodes_[n].sm, nodes_[n].index});
        }
      }
    }
    std::sort(placed.begin(), placed.end());
    for (size_t id = 0; id < nodes_.size(); ++id) {
      const Node& node = nodes_[id];
      for (int w = 0; w < node.num_waits; ++w) {
        const uint32_t c = node.wait_counter[w];
        const int32_t producer = latest[c];
        if (producer >= 0 && producer != static_cast<int32_t>(id) &&
            nodes_[producer].last_sequence >= node.first_sequence) {
          Fail(VerifyFailureKind::kOrderViolation,
               Describe(static_cast<int32_t>(id)) + " waits on " + DescribeCounter(c) +
                   ", fed by " + Describe(producer) + " which comes later in the order");
        }
        if (node.sm < 0) continue;
        // The last producer of c on this SM, if any, must come before the waiter.
        auto it =
            std::upper_bound(placed.begin(), placed.end(),
                             std::array<int32_t, 3>{static_cast<int32_t>(c), node.sm, INT32_MAX});
        if (it != placed.begin() && (*(it - 1))[0] == static_cast<int32_t>(c) &&
            (*(it - 1))[1] == node.sm && (*(it - 1))[2] > node.index) {
          const int32_t behind = SmFirst((*(it - 1))[1]) + (*(it - 1))[2];
          Fail(VerifyFailureKind::kHeadOfLineBlock,
               Describe(static_cast<int32_t>(id)) + " waits on " + DescribeCounter(c) +
                   ", fed by " + Describe(behind) + " behind it on the same SM");
        }
      }
    }
  }

  // Node id of the first task of an SM's list (static nodes come first, in SM order).
  int32_t SmFirst(int32_t sm) const { return sm_first_[sm]; }

  // KV pages: each (row, KV head) of a static layer runs splits 0..S-1 of one S exactly once (the
  // device cuts the live window into S shares), and the full-attention items of each (row, KV
  // head) cover the row's live pages exactly once.
  void CheckAttentionPages() {
    using Key = std::tuple<uint32_t, uint32_t, uint32_t>;              // layer, row, head
    std::map<Key, std::vector<std::pair<uint32_t, uint32_t>>> splits;  // (split, of)
    for (const Node& node : nodes_) {
      if (node.sm < 0 || !node.valid || node.task->opcode != kAttention) continue;
      const TaskDescriptor& t = *node.task;
      for (uint32_t row = t.row_begin; row < t.row_end; ++row) {
        splits[{t.layer, row, t.arg[kArgKvHead]}].push_back({t.split, t.arg[kArgSplits]});
      }
    }
    for (auto& [key, list] : splits) {
      std::sort(list.begin(), list.end());
      bool exact = true;
      for (size_t i = 0; i < list.size(); ++i) {
        exact = exact && list[i].first == i && list[i].second == list.size();
      }
      if (!exact) {
        Fail(VerifyFailureKind::kCoverageGap,
             "attention of layer " + std::to_string(std::get<0>(key)) + " row " +
                 std::to_string(std::get<1>(key)) + " head " + std::to_string(std::get<2>(key)) +
                 " does not run splits 0.." + std::to_string(list.size()) +
                 " of one split count exactly once");
      }
    }
    std::map<std::pair<uint32_t, uint32_t>, std::vector<std::pair<uint32_t, uint32_t>>> items;
    for (const AttentionWorkItem& item : attention_items_) {
      items[{item.row, item.kv_head}].push_back({item.page_begin, item.page_end});
    }
    for (auto& [key, spans] : items) {
      const uint32_t pages =
          static_cast<uint32_t>((work_.live_lengths[key.first] + kBlockTokens - 1) / kBlockTokens);
      std::sort(spans.begin(), spans.end());
      uint32_t at = 0;
      for (const auto& [begin, end] : spans) {
        if (begin != at || end <= begin) break;
        at = end;
      }
      if (at != pages) {
        Fail(VerifyFailureKind::kCoverageGap,
             "full-attention items of row " + std::to_string(key.first) + " head " +
                 std::to_string(key.second) + " do not cover its " + std::to_string(pages) +
                 " pages exactly once");
      }
    }
  }

  // Sampling teams (see the header), grouped by row; a team's size is its first member's.
  void CheckSampleTeams() {
    std::map<uint32_t, std::vector<int32_t>> teams;  // row -> members
    for (size_t n = 0; n < nodes_.size(); ++n) {
      const Node& node = nodes_[n];
      if (node.sm < 0 || !node.valid || node.task->opcode != kSample) continue;
      const int32_t id = static_cast<int32_t>(n);
      const TaskDescriptor& t = *node.task;
      if (t.row_end != t.row_begin + 1) {
        Fail(VerifyFailureKind::kBadSampleTeam,
             Describe(id) + " covers more than one row: a sampling team samples one row");
      }
      CheckSampleWaits(id);
      teams[t.row_begin].push_back(id);
    }
    if (teams.empty()) return;
    for (int64_t row = 0; row < schedule_.batch; ++row) {
      if (!teams.count(static_cast<uint32_t>(row))) {
        Fail(VerifyFailureKind::kBadSampleTeam,
             "row " + std::to_string(row) + " has no sampling team");
      }
    }
    for (const auto& [row, members] : teams) {
      const std::string team = "the sampling team of row " + std::to_string(row);
      const uint32_t size = nodes_[members[0]].task->arg[kArgTeamSize];
      if (size < 1 || size > kMaxSampleTeam) {
        Fail(VerifyFailureKind::kBadSampleTeam, Describe(members[0]) + " says " + team + " has " +
                                                    std::to_string(size) + " members, not 1.." +
                                                    std::to_string(kMaxSampleTeam));
        continue;
      }
      std::vector<int32_t> by_rank(size, -1);
      std::map<int32_t, int32_t> by_sm;  // SM -> member
      for (int32_t id : members) {
        const Node& node = nodes_[id];
        const uint32_t rank = node.task->arg[kArgTeamRank];
        if (node.task->arg[kArgTeamSize] != size) {
          Fail(VerifyFailureKind::kBadSampleTeam, Describe(id) + " says " + team + " has " +
                                                      std::to_string(node.task->arg[kArgTeamSize]) +
                                                      " members, " + Describe(members[0]) +
                                                      " says " + std::to_string(size) +
                                                      ": the members disagree on the team size");
        }
        if (rank >= size) {
          Fail(VerifyFailureKind::kBadSampleTeam, Describe(id) + " has rank " +
                                                      std::to_string(rank) + " in " + team +
                                                      " of " + std::to_string(size));
        } else if (by_rank[rank] >= 0) {
          Fail(VerifyFailureKind::kBadSampleTeam, Describe(id) + " and " + Describe(by_rank[rank]) +
                                                      " both have rank " + std::to_string(rank) +
                                                      " in " + team);
        } else {
          by_rank[rank] = id;
        }
        if (size == 1) continue;  // a team of one has no barrier
        if (auto [other, added] = by_sm.emplace(node.sm, id); !added) {
          Fail(VerifyFailureKind::kBadSampleTeam,
               Describe(id) + " and " + Describe(other->second) + " of " + team +
                   " are on the same SM: members meet at barriers, each needs an SM of its own");
        }
        if (node.index + 1 != static_cast<int32_t>(schedule_.sm_tasks[node.sm].size())) {
          Fail(VerifyFailureKind::kBadSampleTeam,
               Describe(id) + " of " + team +
                   " is not the last task of its SM's list: at its team's barrier it would hold "
                   "up the tasks behind it");
        }
      }
      for (uint32_t rank = 0; rank < size; ++rank) {
        if (by_rank[rank] < 0) {
          Fail(
              VerifyFailureKind::kBadSampleTeam,
              team + " of " + std::to_string(size) + " members lacks rank " + std::to_string(rank));
        }
      }
    }
  }

  // A team member waits on the LM head's counter for every LM head tile, and nothing else.
  void CheckSampleWaits(int32_t id) {
    const TaskDescriptor& t = *nodes_[id].task;
    const uint32_t c = t.wait0_counter;
    const bool lm_head = c != kNoCounter && schedule_.counters[c].producer == Wave::kLmHead &&
                         schedule_.counters[c].layer == config_.num_layers;
    if (!lm_head) {
      Fail(VerifyFailureKind::kBadSampleTeam,
           Describe(id) + " waits on " + DescribeCounter(c) + ", not the LM head's counter");
    } else if (t.wait0_target != schedule_.counters[c].expected_arrivals) {
      Fail(VerifyFailureKind::kBadSampleTeam,
           Describe(id) + " waits for " + DescribeCounter(c) + " to reach " +
               std::to_string(t.wait0_target) + ", not all " +
               std::to_string(schedule_.counters[c].expected_arrivals) + " LM head tiles");
    }
    if (t.wait1_counter != kNoCounter || t.signal_counter != kNoCounter) {
      Fail(VerifyFailureKind::kBadSampleTeam,
           Describe(id) + " has a second wait or a signal: a team member has neither");
    }
  }

  // Which wait of node `id` is not met yet (kNoCounter: none).
  uint32_t Blocking(int32_t id) const {
    const Node& node = nodes_[id];
    for (int w = 0; w < node.num_waits; ++w) {
      if (values_[node.wait_counter[w]] < node.wait_target[w]) return node.wait_counter[w];
    }
    return kNoCounter;
  }

  void Execute(int32_t id, std::vector<int32_t>& ready) {
    order_[id] = next_order_++;
    const Node& node = nodes_[id];
    for (uint32_t s = node.signal_begin; s < node.signal_end; ++s) {
      const uint32_t c = signals_[s].counter;
      values_[c] += signals_[s].weight;
      ready.insert(ready.end(), blocked_[c].begin(), blocked_[c].end());
      blocked_[c].clear();
    }
  }

  // Greedy simulation (see the header for why it proves every interleaving completes).
  bool Simulate() {
    values_.assign(schedule_.counters.size(), 0);
    blocked_.assign(schedule_.counters.size(), {});
    order_.assign(nodes_.size(), -1);
    std::vector<size_t> head(schedule_.sm_tasks.size(), 0);
    std::vector<size_t> next_item(schedule_.queues.size(), 0);
    std::vector<int32_t> ready(schedule_.sm_tasks.size());
    std::iota(ready.begin(), ready.end(), 0);
    // Sampling teams of more than one: a member at the head of its SM with its waits met arrives
    // at its row's barrier, and finishes once the barrier has as many arrivals as its team size.
    struct Barrier {
      uint32_t arrived = 0;
      std::vector<int32_t> waiting;  // SMs whose head member is at the barrier
    };
    std::vector<Barrier> barriers(schedule_.batch);
    std::vector<bool> at_barrier(nodes_.size(), false);
    auto passes_barrier = [&](int32_t id, int32_t sm) {
      const TaskDescriptor& task = *nodes_[id].task;
      if (task.opcode != kSample || !nodes_[id].valid || task.arg[kArgTeamSize] <= 1 ||
          task.row_begin >= barriers.size()) {
        return true;  // not a team's barrier (a row outside the batch is reported elsewhere)
      }
      Barrier& barrier = barriers[task.row_begin];
      if (!at_barrier[id]) {  // arrives: whoever waits there may pass now
        at_barrier[id] = true;
        ++barrier.arrived;
        ready.insert(ready.end(), barrier.waiting.begin(), barrier.waiting.end());
        barrier.waiting.clear();
      }
      if (barrier.arrived >= task.arg[kArgTeamSize]) return true;
      barrier.waiting.push_back(sm);
      return false;
    };
    while (!ready.empty()) {
      const int32_t sm = ready.back();
      ready.pop_back();
      while (head[sm] < schedule_.sm_tasks[sm].size()) {
        const int32_t id = sm_first_[sm] + static_cast<int32_t>(head[sm]);
        uint32_t waiting = Blocking(id);
        // A bounded claim takes nothing here: in a real step it takes at most its limit of items
        // that never wait, so it always ends, and the unbounded claimers that run every item here
        // meet the rest.
        const TaskDescriptor& head_task = *nodes_[id].task;
        if (waiting == kNoCounter && IsClaimOpcode(head_task.opcode) && nodes_[id].valid &&
            head_task.arg[kArgMaxItems] == 0) {
          const uint32_t q = head_task.arg[kArgQueue];
          while (next_item[q] < queue_items_[q].size()) {
            const int32_t item = queue_items_[q][next_item[q]];
            waiting = Blocking(item);
            if (waiting != kNoCounter) break;
            ++next_item[q];
            Execute(item, ready);
          }
        }
        if (waiting != kNoCounter) {
          blocked_[waiting].push_back(sm);
          break;
        }
        if (!passes_barrier(id, sm)) break;
        Execute(id, ready);
        ++head[sm];
      }
    }
    bool complete = true;
    for (size_t sm = 0; sm < head.size(); ++sm) {
      if (head[sm] == schedule_.sm_tasks[sm].size()) continue;
      complete = false;
      const int32_t id = sm_first_[sm] + static_cast<int32_t>(head[sm]);
      uint32_t waiting = Blocking(id);
      std::string what = Describe(id);
      if (waiting == kNoCounter && at_barrier[id]) {
        const TaskDescriptor& t = *nodes_[id].task;
        Fail(VerifyFailureKind::kDeadlock,
             what + " can never finish: only " + std::to_string(barriers[t.row_begin].arrived) +
                 " of the " + std::to_string(t.arg[kArgTeamSize]) + " members of row " +
                 std::to_string(t.row_begin) + "'s sampling team reach its barrier");
        continue;
      }
      if (waiting == kNoCounter) {  // a claimer stuck on its queue's next item
        const uint32_t q = nodes_[id].task->arg[kArgQueue];
        const int32_t item = queue_items_[q][next_item[q]];
        waiting = Blocking(item);
        what += " claiming " + Describe(item);
      }
      uint32_t target = 0;
      const Node& stuck = nodes_[id];
      for (int w = 0; w < stuck.num_waits; ++w) {
        if (stuck.wait_counter[w] == waiting) target = stuck.wait_target[w];
      }
      Fail(VerifyFailureKind::kDeadlock,
           what + " can never run: " + DescribeCounter(waiting) + " is at " +
               std::to_string(values_[waiting]) +
               (target ? " of " + std::to_string(target) : std::string()));
    }
    return complete;
  }

  // Coverage, read-after-write and write-after-read, all through the wait graph.
  void CheckData() {
    InternWaitSets();
    std::vector<Access> scratch;
    for (size_t id = 0; id < nodes_.size(); ++id) {
      const Node& node = nodes_[id];
      if (!node.valid) continue;
      scratch.clear();
      const TaskDescriptor& task = *node.task;
      if (node.sm >= 0) {
        if (task.opcode == kMoeCombine) {
          MoeCombineAccesses(config_, task, expert_queues_[task.layer], scratch);
        } else {
          TaskAccesses(config_, schedule_, task, scratch);
        }
      } else {
        const QueueInfo& queue = schedule_.queues[node.queue];
        if (queue.kind == QueueKind::kLmHead) {
          LmHeadItemAccesses(config_, schedule_, task, static_cast<uint32_t>(node.item), scratch);
        } else if (queue.kind == QueueKind::kAttention) {
          AttentionItemAccesses(config_, schedule_, queue.layer, attention_items_[node.item],
                                scratch);
        } else {
          const ExpertQueues& eq = expert_queues_[queue.layer];
          const bool down = queue.kind == QueueKind::kExpertDown;
          ExpertItemAccesses(config_, schedule_, queue.layer,
                             down ? eq.down[node.item] : eq.gate_up[node.item], down, eq, scratch);
        }
      }
      for (const Access& access : scratch) {
        accesses_.push_back({access, static_cast<int32_t>(id)});
      }
    }

    // Group accesses by tensor version.
    using Version = std::pair<int, int32_t>;
    std::map<Version, std::vector<int32_t>> writes, reads;
    for (size_t a = 0; a < accesses_.size(); ++a) {
      const Access& access = accesses_[a].access;
      const Version version{static_cast<int>(access.tensor), access.version};
      (access.write ? writes : reads)[version].push_back(static_cast<int32_t>(a));
    }
    for (const Version& version : ExpectedVersions(writes)) {
      if (!writes.count(version)) {
        Fail(VerifyFailureKind::kCoverageGap, std::string("no task writes ") +
                                                  TensorName(static_cast<Tensor>(version.first)) +
                                                  " of layer " + std::to_string(version.second));
      }
    }
    std::map<Version, Grid> grids;
    for (auto& [version, list] : writes) grids[version] = BuildGrid(version, list);
    for (auto& [version, list] : reads) {
      auto grid = grids.find(version);
      if (grid == grids.end()) {
        Fail(VerifyFailureKind::kCoverageGap, Describe(accesses_[list[0]].node) + " reads " +
                                                  TensorName(static_cast<Tensor>(version.first)) +
                                                  " of layer " + std::to_string(version.second) +
                                                  ", which no task writes");
        continue;
      }
      for (int32_t a : list) {
        ForWriters(grid->second, accesses_[a].access, [&](int32_t writer) {
          Require(accesses_[a].node, writer, VerifyFailureKind::kReadWithoutDependency, a);
        });
      }
      // The next version of a reused buffer overwrites what these reads see.
      const Tensor tensor = static_cast<Tensor>(version.first);
      if (!TensorReusesBuffer(tensor)) continue;
      auto next = grids.upper_bound(version);
      if (next == grids.end() || next->first.first != version.first) continue;
      // Layers may lay the buffer out differently (e.g. split slots), so any writer of the
      // reader's rows counts as overlapping.
      for (int32_t a : list) {
        Access rows = accesses_[a].access;
        rows.col_begin = 0;
        rows.col_end = next->second.col_bounds.back();
        ForWriters(next->second, rows, [&](int32_t writer) {
          Require(writer, accesses_[a].node, VerifyFailureKind::kWriteAfterRead, a);
        });
      }
    }
    ResolveQueries();
  }

  std::vector<std::pair<int, int32_t>> ExpectedVersions(
      const std::map<std::pair<int, int32_t>, std::vector<int32_t>>& writes) const {
    std::vector<std::pair<int, int32_t>> expected;
    auto add = [&](Tensor t, int64_t v) {
      expected.push_back({static_cast<int>(t), static_cast<int32_t>(v)});
    };
    for (int64_t l = 0; l < config_.num_layers; ++l) {
      add(Tensor::kResidual, l);
      add(Tensor::kXNorm, l);
      for (Tensor t :
           {Tensor::kQ, Tensor::kKvNew, Tensor::kAttnIn, Tensor::kAttnOut, Tensor::kFfnOut}) {
        add(t, l);
      }
      if (config_.layers[l].attention == AttentionKind::kFull ||
          schedule_.tiles.sliding_splits > 1) {
        add(Tensor::kAttnPartial, l);
      }
      if (config_.layers[l].ffn == FfnKind::kDense) {
        add(Tensor::kDenseHidden, l);
      } else {
        for (Tensor t :
             {Tensor::kRouterLogits, Tensor::kRouting, Tensor::kMoeHidden, Tensor::kMoeOut}) {
          add(t, l);
        }
        if (schedule_.tiles.pick_items == 0) add(Tensor::kExpertQueues, l);  // the finalize's
      }
    }
    add(Tensor::kResidual, config_.num_layers);
    add(Tensor::kXNorm, config_.num_layers);
    add(Tensor::kLogits, config_.num_layers);
    for (const auto& [version, list] : writes) {
      if (version.first == static_cast<int>(Tensor::kSampled))
        add(Tensor::kSampled, version.second);
    }
    return expected;
  }

  // A tensor version cut into cells at every write boundary; each cell lists its writers.
  struct Grid {
    std::vector<int64_t> row_bounds, col_bounds;
    std::vector<uint32_t> cell_begin;  // compressed: writers of cell c
    std::vector<int32_t> writers;      // access ids
  };

  Grid BuildGrid(std::pair<int, int32_t> version, const std::vector<int32_t>& list) {
    const Tensor tensor = static_cast<Tensor>(version.first);
    const TensorExtent extent = ExtentOf(config_, schedule_, tensor, version.second);
    const std::string name =
        std::string(TensorName(tensor)) + " of layer " + std::to_string(version.second);
    Grid grid;
    grid.row_bounds = {0, extent.rows};
    grid.col_bounds = {0, extent.cols};
    std::vector<int32_t> inside;
    for (int32_t a : list) {
      const Access& w = accesses_[a].access;
      if (w.row_begin < 0 || w.row_end > extent.rows || w.row_begin >= w.row_end ||
          w.col_begin < 0 || w.col_end > extent.cols || w.col_begin >= w.col_end || w.k_begin < 0 ||
          w.k_end > extent.k_total || w.k_begin >= w.k_end) {
        Fail(VerifyFailureKind::kOutOfBounds, Describe(accesses_[a].node) + " writes outside " +
                                                  name + " [" + std::to_string(extent.rows) +
                                                  " x " + std::to_string(extent.cols) + ", K " +
                                                  std::to_string(extent.k_total) + "]");
        continue;
      }
      inside.push_back(a);
      grid.row_bounds.push_back(w.row_begin);
      grid.row_bounds.push_back(w.row_end);
      grid.col_bounds.push_back(w.col_begin);
      grid.col_bounds.push_back(w.col_end);
    }
    for (auto* bounds : {&grid.row_bounds, &grid.col_bounds}) {
      std::sort(bounds->begin(), bounds->end());
      bounds->erase(std::unique(bounds->begin(), bounds->end()), bounds->end());
    }
    const size_t cols = grid.col_bounds.size() - 1;
    const size_t cells = (grid.row_bounds.size() - 1) * cols;
    struct Piece {
      uint32_t cell;
      int64_t k_begin, k_end;
      int32_t access;
    };
    std::vector<Piece> pieces;
    for (int32_t a : inside) {
      const Access& w = accesses_[a].access;
      const size_t r0 = Index(grid.row_bounds, w.row_begin), r1 = Index(grid.row_bounds, w.row_end);
      const size_t c0 = Index(grid.col_bounds, w.col_begin), c1 = Index(grid.col_bounds, w.col_end);
      for (size_t r = r0; r < r1; ++r) {
        for (size_t c = c0; c < c1; ++c) {
          pieces.push_back({static_cast<uint32_t>(r * cols + c), w.k_begin, w.k_end, a});
        }
      }
    }
    std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
      return a.cell != b.cell ? a.cell < b.cell : a.k_begin < b.k_begin;
    });
    grid.cell_begin.assign(cells + 1, 0);
    size_t p = 0;
    bool reported_gap = false, reported_double = false;  // once per kind and tensor version
    for (size_t cell = 0; cell < cells; ++cell) {
      grid.cell_begin[cell] = static_cast<uint32_t>(grid.writers.size());
      int64_t at = 0;
      for (; p < pieces.size() && pieces[p].cell == cell; ++p) {
        const bool overlap = pieces[p].k_begin<at, gap = pieces[p].k_begin> at;
        if ((overlap && !reported_double) || (gap && !reported_gap)) {
          const int32_t node = accesses_[pieces[p].access].node;
          Fail(overlap ? VerifyFailureKind::kDoubleWrite : VerifyFailureKind::kCoverageGap,
               Describe(node) +
                   (overlap ? " writes again part of " : " leaves a gap before it in ") + name +
                   CellText(grid, cell) + " (K " + std::to_string(pieces[p].k_begin) + " where " +
                   std::to_string(at) + " was expected)");
          (overlap ? reported_double : reported_gap) = true;
        }
        at = std::max(at, pieces[p].k_end);
        grid.writers.push_back(pieces[p].access);
      }
      if (!reported_gap && at != extent.k_total) {
        Fail(VerifyFailureKind::kCoverageGap,
             "no task writes " + name + CellText(grid, cell) +
                 (at ? " for K from " + std::to_string(at) : std::string()));
        reported_gap = true;
      }
    }
    grid.cell_begin[cells] = static_cast<uint32_t>(grid.writers.size());
    return grid;
  }

  static std::string CellText(const Grid& grid, size_t cell) {
    const size_t cols = grid.col_bounds.size() - 1;
    const size_t r = cell / cols, c = cell % cols;
    return " rows " + std::to_string(grid.row_bounds[r]) + ".." +
           std::to_string(grid.row_bounds[r + 1]) + " cols " + std::to_string(grid.col_bounds[c]) +
           ".." + std::to_string(grid.col_bounds[c + 1]);
  }

  static size_t Index(const std::vector<int64_t>& bounds, int64_t value) {
    return static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), value) -
                               bounds.begin());
  }

  // Calls visit(writer node) for every writer of a cell the access overlaps.
  template <class Visit>
  void ForWriters(const Grid& grid, const Access& access, Visit visit) {
    const int64_t rows = grid.row_bounds.back(), cols_end = grid.col_bounds.back();
    if (access.row_begin < 0 || access.row_end > rows || access.col_begin < 0 ||
        access.col_end > cols_end || access.row_begin >= access.row_end ||
        access.col_begin >= access.col_end) {
      if (!access.write) {
        Fail(VerifyFailureKind::kOutOfBounds,
             std::string("a read of ") + TensorName(access.tensor) + " of layer " +
                 std::to_string(access.version) + " rows " + std::to_string(access.row_begin) +
                 ".." + std::to_string(access.row_end) + " cols " +
                 std::to_string(access.col_begin) + ".." + std::to_string(access.col_end) +
                 " is outside the tensor");
      }
      return;
    }
    const size_t cols = grid.col_bounds.size() - 1;
    // The cells containing the access: bounds at or before its start, up to its end.
    const size_t r0 =
        std::upper_bound(grid.row_bounds.begin(), grid.row_bounds.end(), access.row_begin) -
        grid.row_bounds.begin() - 1;
    const size_t c0 =
        std::upper_bound(grid.col_bounds.begin(), grid.col_bounds.end(), access.col_begin) -
        grid.col_bounds.begin() - 1;
    for (size_t r = r0; r + 1 < grid.row_bounds.size() && grid.row_bounds[r] < access.row_end;
         ++r) {
      for (size_t c = c0; c < cols && grid.col_bounds[c] < access.col_end; ++c) {
        const size_t cell = r * cols + c;
        for (uint32_t w = grid.cell_begin[cell]; w < grid.cell_begin[cell + 1]; ++w) {
          visit(accesses_[grid.writers[w]].node);
        }
      }
    }
  }

  // Nodes with the same waits have the same ancestors: one id per distinct wait set.
  void InternWaitSets() {
    std::map<WaitSet, uint32_t> ids;
    wait_set_.resize(nodes_.size());
    for (size_t id = 0; id < nodes_.size(); ++id) {
      WaitSet key = nodes_[id].wait_counter;
      std::sort(key.begin(), key.end());
      auto [it, added] = ids.emplace(key, static_cast<uint32_t>(wait_sets_.size()));
      if (added) wait_sets_.push_back(key);
      wait_set_[id] = it->second;
    }
    // lift_[k]: when every producer of wait set k's counters waits on one same set, that set.
    lift_.assign(wait_sets_.size(), -1);
    for (size_t k = 0; k < wait_sets_.size(); ++k) {
      int64_t common = -1;
      bool same = true;
      for (uint32_t c : wait_sets_[k]) {
        if (c == kNoCounter) continue;
        for (uint32_t a = arriver_begin_[c]; a < arriver_begin_[c + 1] && same; ++a) {
          const int64_t set = wait_set_[arrivers_[a]];
          same = common < 0 || common == set;
          common = set;
        }
      }
      if (same && common >= 0 && common != static_cast<int64_t>(k)) lift_[k] = common;
    }
  }

  // True when `node` signals a counter of wait set k.
  bool Feeds(int32_t node, uint32_t k) const {
    const Node& n = nodes_[node];
    for (uint32_t s = n.signal_begin; s < n.signal_end; ++s) {
      for (uint32_t c : wait_sets_[k]) {
        if (c == signals_[s].counter) return true;
      }
    }
    return false;
  }

  // Records that `descendant` must transitively wait on `ancestor`.
  void Require(int32_t descendant, int32_t ancestor, VerifyFailureKind kind, int32_t access) {
    if (descendant == ancestor) return;
    // The ancestors of a node with wait set k are the producers of k's counters plus, when those
    // producers share one wait set, that set's ancestors: climb while that holds.
    uint32_t k = wait_set_[descendant];
    for (int steps = 0; steps < 64; ++steps) {
      if (Feeds(ancestor, k)) return;
      if (lift_[k] < 0) break;
      k = static_cast<uint32_t>(lift_[k]);
    }
    const uint64_t pair = static_cast<uint64_t>(k) << 32 | static_cast<uint32_t>(ancestor);
    if (!asked_.insert(pair).second) return;  // the same question, the same answer
    const uint64_t sort_key =
        static_cast<uint64_t>(k) << 32 | static_cast<uint32_t>(INT32_MAX - order_[ancestor]);
    queries_.push_back({sort_key, descendant, ancestor, kind, access});
  }

  // Answers the ancestor queries: per wait set, one backward search over the wait graph that
  // expands nodes in decreasing simulation order, only as deep as the queries need.
  void ResolveQueries() {
    std::sort(queries_.begin(), queries_.end(), [](const AncestorQuery& a, const AncestorQuery& b) {
      return a.sort_key < b.sort_key;
    });
    std::vector<uint32_t> seen(nodes_.size(), 0);
    uint32_t epoch = 0;
    std::priority_queue<std::pair<int32_t, int32_t>> frontier;  // (order, node)
    std::vector<uint32_t> counter_seen(schedule_.counters.size(), 0);
    auto discover = [&](uint32_t counter) {
      if (counter_seen[counter] == epoch) return;  // its producers are already discovered
      counter_seen[counter] = epoch;
      for (uint32_t a = arriver_begin_[counter]; a < arriver_begin_[counter + 1]; ++a) {
        const int32_t n = arrivers_[a];
        if (seen[n] != epoch) {
          seen[n] = epoch;
          frontier.push({order_[n], n});
        }
      }
    };
    for (size_t q = 0; q < queries_.size(); ++q) {
      const AncestorQuery& query = queries_[q];
      const uint32_t key = static_cast<uint32_t>(query.sort_key >> 32);
      if (q == 0 || key != static_cast<uint32_t>(queries_[q - 1].sort_key >> 32)) {
        ++epoch;
        frontier = {};
        for (uint32_t counter : wait_sets_[key]) {
          if (counter != kNoCounter) discover(counter);
        }
      }
      const int32_t bound = order_[query.ancestor];
      while (!frontier.empty() && frontier.top().first >= bound) {
        const int32_t n = frontier.top().second;
        frontier.pop();
        const Node& node = nodes_[n];
        for (int w = 0; w < node.num_waits; ++w) discover(node.wait_counter[w]);
      }
      if (seen[query.ancestor] != epoch) {
        const Access& access = accesses_[query.access].access;
        const std::string data =
            std::string(TensorName(access.tensor)) + " of layer " + std::to_string(access.version);
        if (query.kind == VerifyFailureKind::kReadWithoutDependency) {
          Fail(query.kind, Describe(query.descendant) + " reads " + data + " written by " +
                               Describe(query.ancestor) + " without waiting on it");
        } else {
          Fail(query.kind, Describe(query.descendant) + " overwrites " + data + " that " +
                               Describe(query.ancestor) + " reads, without waiting on it");
        }
      }
    }
  }

  const ModelConfig& config_;
  const Schedule& schedule_;
  const RunTimeWork& work_;
  VerifyChecks checks_;
  VerifyReport report_;
  std::array<int, 32> reported_{};

  std::vector<Node> nodes_;
  std::vector<int32_t> sm_first_;
  std::vector<Signal> signals_;
  std::vector<std::vector<int32_t>> claimers_;     // per queue
  std::vector<std::vector<int32_t>> queue_items_;  // per queue, in claim order
  std::vector<AttentionWorkItem> attention_items_;
  std::vector<ExpertQueues> expert_queues_;  // per layer

  std::vector<uint64_t> arrivals_;
  std::vector<uint32_t> arriver_begin_;
  std::vector<int32_t> arrivers_;

  std::vector<uint64_t> values_;
  std::vector<std::vector<int32_t>> blocked_;
  std::vector<int32_t> order_;
  int32_t next_order_ = 0;

  std::vector<AccessRecord> accesses_;
  std::vector<WaitSet> wait_sets_;  // distinct wait sets
  std::vector<uint32_t> wait_set_;  // per node
  std::vector<int64_t> lift_;       // per wait set, see InternWaitSets
  std::unordered_set<uint64_t> asked_;
  std::vector<AncestorQuery> queries_;
};

}  // namespace

std::string_view FailureKindName(VerifyFailureKind kind) {
  switch (kind) {
    case VerifyFailureKind::kBadDescriptor:
      return "bad_descriptor";
    case VerifyFailureKind::kUnknownCounter:
      return "unknown_counter";
    case VerifyFailureKind::kUnreachableTarget:
      return "unreachable_target";
    case VerifyFailureKind::kOverArrival:
      return "over_arrival";
    case VerifyFailureKind::kWaitersDisagree:
      return "waiters_disagree";
    case VerifyFailureKind::kArrivalMismatch:
      return "arrival_mismatch";
    case VerifyFailureKind::kArrivalsWithoutWaiter:
      return "arrivals_without_waiter";
    case VerifyFailureKind::kCounterReused:
      return "counter_reused";
    case VerifyFailureKind::kOrderViolation:
      return "order_violation";
    case VerifyFailureKind::kHeadOfLineBlock:
      return "head_of_line_block";
    case VerifyFailureKind::kDeadlock:
      return "deadlock";
    case VerifyFailureKind::kQueueOverflow:
      return "queue_overflow";
    case VerifyFailureKind::kDoubleWrite:
      return "double_write";
    case VerifyFailureKind::kCoverageGap:
      return "coverage_gap";
    case VerifyFailureKind::kOutOfBounds:
      return "out_of_bounds";
    case VerifyFailureKind::kReadWithoutDependency:
      return "read_without_dependency";
    case VerifyFailureKind::kWriteAfterRead:
      return "write_after_read";
    case VerifyFailureKind::kBadSampleTeam:
      return "bad_sample_team";
  }
  return "unknown";
}

bool VerifyReport::Has(VerifyFailureKind kind) const {
  return std::any_of(failures.begin(), failures.end(),
                     [&](const VerifyFailure& f) { return f.kind == kind; });
}

std::string VerifyReport::Summary() const {
  std::string text =
      std::to_string(failure_count) + " failure(s) over " + std::to_string(nodes) + " nodes";
  for (const VerifyFailure& f : failures) {
    text += "\n  " + std::string(FailureKindName(f.kind)) + ": " + f.message;
  }
  return text;
}

VerifyReport VerifySchedule(const ModelConfig& config, const Schedule& schedule,
                            const RunTimeWork& work, VerifyChecks checks) {
  return Verifier(config, schedule, work, checks).Run();
}

std::vector<RunTimeWork> StandardWork(const ModelConfig& config, int64_t batch,
                                      const ContextBucket& bucket) {
  const int64_t top_k = config.num_experts_per_token;
  const int64_t experts = std::max<int64_t>(1, config.num_experts);
  const int64_t longest = bucket.max_context_tokens;
  std::vector<RunTimeWork> instances(3);
  std::mt19937 random(static_cast<uint32_t>(batch * 7919 + longest));
  for (int64_t row = 0; row < batch; ++row) {
    instances[0].live_lengths.push_back(longest);
    instances[1].live_lengths.push_back(1 + (longest - 1) * row / std::max<int64_t>(1, batch - 1));
    instances[2].live_lengths.push_back(std::uniform_int_distribution<int64_t>(1, longest)(random));
  }
  for (RunTimeWork& work : instances) work.routing.resize(config.num_layers);
  std::vector<int32_t> pool(experts);
  for (int64_t l = 0; l < config.num_layers; ++l) {
    if (config.layers[l].ffn != FfnKind::kMoe) continue;
    for (int64_t row = 0; row < batch; ++row) {
      std::iota(pool.begin(), pool.end(), 0);
      std::shuffle(pool.begin(), pool.end(), random);
      for (int64_t k = 0; k < top_k; ++k) {
        instances[0].routing[l].push_back(static_cast<int32_t>((row * top_k + k + l) % experts));
        instances[1].routing[l].push_back(static_cast<int32_t>(k));
        instances[2].routing[l].push_back(pool[k]);
      }
    }
  }
  return instances;
}

}  // namespace mkserve::megakernel
