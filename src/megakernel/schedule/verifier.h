// The schedule verifier: simulates one step of a schedule on the CPU, for one instance of the
// work only known at run time, and reports every way the step could hang or compute from data
// that is not ready. CI runs the synchronisation checks for every (batch, bucket) the server can
// select and the data checks on a sample; ScheduleCache runs the synchronisation checks on every
// schedule it builds.
//
// What is checked (each failure names its kind):
//  - descriptors: opcodes, layers, rows, counter ids, queue ids in range (kBadDescriptor,
//    kUnknownCounter); all claimers of one queue identical but for kArgMaxItems, which only
//    gate/up claims (items without waits) carry, and each queue with items has an unbounded one.
//  - counters: every waiter of a counter expects exactly the arrivals it gets (kUnreachableTarget:
//    target above the arrivals, the wait would hang; kOverArrival: more arrivals than the target,
//    a signal is counted in the wrong place; kWaitersDisagree), arrivals match the builder's table
//    (kArrivalMismatch), nobody signals a counter nobody waits on (kArrivalsWithoutWaiter), and
//    every arrival comes from the (wave, layer) the counter belongs to (kCounterReused).
//  - order: each SM's list follows the global order and every wait's producers come earlier in
//    it (kOrderViolation); no task waits on a counter fed by a later task on its own SM
//    (kHeadOfLineBlock).
//  - deadlock freedom (kDeadlock), by a greedy simulation. Counters only grow, so once a task
//    can run it stays runnable. A claim task at the head of its SM claims the queue's next item
//    and runs it; the simulation lets it do so only when the item can run, which is one legal
//    interleaving. If the simulation finishes, every interleaving finishes: take the unfinished
//    node (task or item) earliest in the simulation's order; everything before it finished, so
//    its SM's earlier tasks are done, its waits (met in the simulation by earlier nodes) are
//    met, and if it is an unclaimed item, the claimer that ran it in the simulation is at the
//    head of its SM with all earlier items of the queue finished, so it claims it. Either way it
//    can run, so nothing is stuck. A bounded claim takes nothing in the simulation: in a step it
//    takes at most its bound of items that never wait, so it always ends. A sampling team of more
//    than one member is a barrier: the simulation finishes its members only once all of them have
//    arrived (reached the head of their SMs with their waits met), so the same argument holds with
//    the team as one node.
//  - sampling teams (kBadSampleTeam), when the schedule has kSample tasks: one team per row of
//    the batch, rows [r, r+1), ranks 0..T-1 of one team size T (1..kMaxSampleTeam) once each,
//    each member waiting on the LM head's counter for all its tiles and signalling nothing. With
//    T > 1 the members are on distinct SMs and each is the last task of its SM's list: the team's
//    barriers are outside the counters, so its members must be co-resident and a member at a
//    barrier must hold up no other task.
//  - queues: the instance's items fit each queue's capacity (kQueueOverflow).
//  - data: every element of every tensor version is written exactly once, split-K writers'
//    K ranges tiling [0, K) (kDoubleWrite, kCoverageGap, kOutOfBounds); every read is of data
//    written by a node the reader transitively waits on (kReadWithoutDependency); and where a
//    buffer is reused by the next layer, every writer of the next version transitively waits on
//    the readers of the previous one (kWriteAfterRead). Attention splits' KV pages cover each
//    row's pages exactly once (kCoverageGap).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "megakernel/schedule/schedule.h"
#include "model/model_config.h"

namespace mkserve::megakernel {

enum class VerifyFailureKind {
  kBadDescriptor,
  kUnknownCounter,
  kUnreachableTarget,
  kOverArrival,
  kWaitersDisagree,
  kArrivalMismatch,
  kArrivalsWithoutWaiter,
  kCounterReused,
  kOrderViolation,
  kHeadOfLineBlock,
  kDeadlock,
  kQueueOverflow,
  kDoubleWrite,
  kCoverageGap,
  kOutOfBounds,
  kReadWithoutDependency,
  kWriteAfterRead,
  kBadSampleTeam,
};

std::string_view FailureKindName(VerifyFailureKind kind);

struct VerifyFailure {
  VerifyFailureKind kind;
  std::string message;
};

// One instance of the work the host cannot know when it builds the schedule.
struct RunTimeWork {
  std::vector<int64_t> live_lengths;          // [batch]: tokens a full layer attends to (pos + 1)
  std::vector<std::vector<int32_t>> routing;  // [num_layers]: MoE layers [batch * top_k] experts
};

struct VerifyReport {
  std::vector<VerifyFailure> failures;  // the first few of each kind
  int64_t failure_count = 0;
  int64_t nodes = 0;  // tasks and work items simulated

  bool ok() const { return failure_count == 0; }
  bool Has(VerifyFailureKind kind) const;
  std::string Summary() const;  // one line per reported failure
};

// kSynchronisation skips the data checks (coverage, read-after-write, write-after-read), which
// cost most of the time; everything about counters, order and deadlock still runs.
enum class VerifyChecks { kAll, kSynchronisation };

VerifyReport VerifySchedule(const ModelConfig& config, const Schedule& schedule,
                            const RunTimeWork& work, VerifyChecks checks = VerifyChecks::kAll);

// The instances CI checks a schedule with: (1) every row at the bucket's longest context and
// routing spread over as many experts as possible (the most items); (2) ragged rows from 1 token
// up, every row routed to the same experts (the longest expert buckets); (3) a seeded random mix.
std::vector<RunTimeWork> StandardWork(const ModelConfig& config, int64_t batch,
                                      const ContextBucket& bucket);

}  // namespace mkserve::megakernel
