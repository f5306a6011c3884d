// kSample alone: teams of CTAs on distinct SMs sample logits rows inside the megakernel, against
// the GpuSampler's own kernel (tested against the CPU sampler in cuda_gpu_sampler_test) on a copy
// of the same rows, over every combination of the sampling parameters, row shapes, grammar masks
// and team sizes from one SM to all of them. Tokens must be identical and logprobs within the
// sampler tests' tolerance; a row without a request gets its argmax; every row's token is also
// its pick in device memory (what a step started next takes it from).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/sampling/gpu_sampler.h"
#include "backends/cuda/sampling_cases.h"
#include "op_harness.h"

namespace mkserve::megakernel::testing {
namespace {

using cuda::GpuSampler;
using cuda::GpuSampleRequest;
using cuda::testing::Case;
using cuda::testing::Shape;

// Rows [0, rows) of `logits` through kSample with teams of `team`; request_of_row[r] indexes
// `cases` (-1: the argmax only). Returns the kernel's results (argmax rows: token_id only) and
// leaves `logits` as the kernel left it.
std::vector<SequenceResult> SampleInKernel(DeviceBuffer<float>& logits, int64_t vocab,
                                           std::vector<Case>& cases,
                                           const std::vector<int32_t>& request_of_row, int team) {
  const int rows = static_cast<int>(request_of_row.size());
  std::vector<GpuSampleRequest> requests;
  for (int r = 0; r < rows; ++r) {
    if (request_of_row[r] >= 0) requests.push_back({r, &cases[request_of_row[r]].step});
  }
  GpuSampler staging(vocab);
  const cuda::StagedSamples staged = staging.Stage(rows, requests, 0);
  DeviceBuffer<SampleBarriers> barriers(rows);
  DeviceBuffer<SampleHistograms> histograms(rows);
  DeviceBuffer<SampleSlots> slots(rows);
  MKSERVE_CUDA_CHECK(cudaMemset(barriers.data(), 0, barriers.bytes()));
  MKSERVE_CUDA_CHECK(cudaMemset(histograms.data(), 0, histograms.bytes()));
  MKSERVE_CUDA_CHECK(cudaMemset(slots.data(), 0xFF, slots.bytes()));  // read before written: NaN
  DeviceBuffer<int32_t> request_device = cuda::testing::ToDevice(request_of_row);
  DeviceBuffer<int32_t> argmax = cuda::testing::ToDevice(std::vector<int32_t>(rows, -9));
  DeviceBuffer<int32_t> picks = cuda::testing::ToDevice(std::vector<int32_t>(rows, -9));
  DeviceBuffer<uint32_t> counters = cuda::testing::ToDevice(std::vector<uint32_t>(1, 0));
  DeviceBuffer<uint32_t> aborted = cuda::testing::ToDevice(std::vector<uint32_t>(1, 0));
  StepParams p;
  p.batch = rows;
  p.vocab = static_cast<int32_t>(vocab);
  p.logits = logits.data();
  p.sample_request = request_device.data();
  p.staged = staged;
  p.argmax_out = argmax.data();
  p.picks_out = picks.data();
  p.sample_barriers = barriers.data();
  p.sample_histograms = histograms.data();
  p.sample_slots = slots.data();
  p.counters = counters.data();
  p.aborted = aborted.data();
  std::vector<std::vector<TaskDescriptor>> lists(MegakernelGridSize());
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k < team; ++k) {
      TaskDescriptor t = Task(kSample, 1);
      t.row_begin = static_cast<uint32_t>(r);
      t.row_end = static_cast<uint32_t>(r + 1);
      t.arg[kArgTeamRank] = static_cast<uint32_t>(k);
      t.arg[kArgTeamSize] = static_cast<uint32_t>(team);
      lists.at(r * team + k).push_back(t);
    }
  }
  RunLists(p, lists);
  EXPECT_EQ(cuda::testing::ToHost(aborted)[0], 0u) << "a team exceeded its exchange";
  std::vector<SequenceResult> sampled = staging.Collect(0);
  const std::vector<int32_t> argmax_host = cuda::testing::ToHost(argmax);
  std::vector<SequenceResult> results(rows);
  size_t next = 0;
  for (int r = 0; r < rows; ++r) {
    if (request_of_row[r] >= 0) {
      results[r] = sampled.at(next++);
    } else {
      results[r].token_id = argmax_host[r];
    }
  }
  const std::vector<int32_t> picks_host = cuda::testing::ToHost(picks);
  for (int r = 0; r < rows; ++r) {
    EXPECT_EQ(picks_host[r], results[r].token_id) << "row " << r << "'s pick in device memory";
  }
  return results;
}

// The lowest id of the row's largest value (rows here hold no NaN).
int32_t HostArgmax(const float* row, int64_t vocab) {
  return static_cast<int32_t>(std::max_element(row, row + vocab) - row);
}

struct Launches {
  int rows = 1;              // rows per launch
  int team = 1;              // members per row
  bool argmax_row = true;    // row 0 of each launch has no request: its argmax only
  bool constrained = false;  // every request has a random grammar mask
  int combo_begin = 0;       // the first parameter combination
};

// `num_combos` parameter combinations (combo_begin + i * combo_step, modulo the 864) on rows of
// `shape`, each on its own row, in launches as `l` says.
void CompareWithGpuSampler(Shape shape, int64_t vocab, int num_combos, int combo_step,
                           uint32_t seed, const Launches& l) {
  cuda::testing::RequireGpu();
  ASSERT_LE(l.rows * l.team, MegakernelGridSize());
  const int per_launch = l.rows - (l.argmax_row ? 1 : 0), offset = l.argmax_row ? 1 : 0;
  ASSERT_GT(per_launch, 0);
  std::mt19937 rng(seed);
  GpuSampler oracle(vocab);
  for (int first = 0; first < num_combos; first += per_launch) {
    const int count = std::min(per_launch, num_combos - first);
    std::vector<Case> cases(count);
    std::vector<int32_t> request_of_row;
    if (l.argmax_row) request_of_row.push_back(-1);
    std::vector<float> host;
    for (int r = 0; r < count + offset; ++r) {
      const std::vector<float> row = cuda::testing::MakeRow(shape, vocab, seed * 7919 + first + r);
      host.insert(host.end(), row.begin(), row.end());
    }
    for (int i = 0; i < count; ++i) {
      SetCombo(cases[i], (l.combo_begin + (first + i) * combo_step) % 864, vocab, rng);
      Link(cases[i], 500 + first + i, (first + i) % 7);
      if (l.constrained) AllowRandomTokens(cases[i], vocab, rng, first + i);
      request_of_row.push_back(i);
    }
    DeviceBuffer<float> for_oracle = cuda::testing::ToDevice(host);
    std::vector<GpuSampleRequest> requests;
    for (int i = 0; i < count; ++i) requests.push_back({i + offset, &cases[i].step});
    const std::vector<SequenceResult> want =
        oracle.Sample(for_oracle.data(), count + offset, requests, 0);
    DeviceBuffer<float> logits = cuda::testing::ToDevice(host);
    const std::vector<SequenceResult> got =
        SampleInKernel(logits, vocab, cases, request_of_row, l.team);
    const std::string where =
        "vocab " + std::to_string(vocab) + " team " + std::to_string(l.team) + " ";
    if (l.argmax_row) {
      EXPECT_EQ(got[0].token_id, HostArgmax(host.data(), vocab)) << where << "argmax row";
    }
    for (int i = 0; i < count; ++i) {
      cuda::testing::ExpectSame(got[i + offset], want[i], where + cases[i].name);
    }
  }
}

TEST(MegakernelSample, EveryComboMatchesTheGpuSampler) {
  const int sms = MegakernelGridSize();
  CompareWithGpuSampler(Shape::kFlat, 4099, 864, 1, 1, {.rows = 12, .team = sms / 12});
  CompareWithGpuSampler(Shape::kPeaked, 4099, 864, 1, 2, {.rows = 12, .team = 3});
  CompareWithGpuSampler(Shape::kTies, 4099, 864, 1, 3, {.rows = 12, .team = 1});
  CompareWithGpuSampler(Shape::kMasked, 4099, 864, 1, 4, {.rows = 6, .team = sms / 6});
}

TEST(MegakernelSample, AllowedTokensMatchTheGpuSampler) {
  const int sms = MegakernelGridSize();
  CompareWithGpuSampler(Shape::kFlat, 4099, 200, 7, 8,
                        {.rows = 10, .team = sms / 10, .constrained = true});
  CompareWithGpuSampler(Shape::kFlat, 262144, 12, 37, 10,
                        {.rows = 4, .team = sms / 4, .constrained = true});
}

// The real vocabulary, with the team sizes the schedules use: a few SMs a row (batch 8-64), two
// and one SM a row, and every SM for one row (batch 1) with requests of every kind.
TEST(MegakernelSample, FullVocabularyAtEveryTeamSize) {
  const int sms = MegakernelGridSize();
  CompareWithGpuSampler(Shape::kTies, 262144, 20, 37, 7, {.rows = 11, .team = sms / 11});
  CompareWithGpuSampler(Shape::kFlat, 262144, 20, 41, 9, {.rows = 11, .team = 2});
  CompareWithGpuSampler(Shape::kPeaked, 262144, 10, 43, 11, {.rows = 11, .team = 1});
  for (int combo : {0, 1, 2, 13, 40, 107, 200, 433, 500, 863}) {
    CompareWithGpuSampler(combo % 2 ? Shape::kPeaked : Shape::kFlat, 262144, 1, 1,
                          static_cast<uint32_t>(20 + combo),
                          {.rows = 1, .team = sms, .argmax_row = false, .combo_begin = combo});
  }
}

}  // namespace
}  // namespace mkserve::megakernel::testing
