// Host only: the decode path registry's names, errors and memory, and the step metadata a captured
// decode step is keyed by (BucketPlan) and reads (PackMetadata).
#include "backends/cuda/decode/decode_path_registry.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "backends/cuda/core/step_metadata.h"
#include "common/error.h"
#include "model/presets.h"

namespace mkserve::cuda {
namespace {

TEST(DecodePathRegistryTest, NamesTheRegisteredPathsAndRefusesOthers) {
  const std::vector<std::string> names = DecodePathNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "eager"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "graph"), names.end());
  for (const std::string& name : names) EXPECT_NO_THROW(CheckDecodePathChoice(name));
  EXPECT_NO_THROW(CheckDecodePathChoice("layered"));
  try {
    CheckDecodePathChoice("warp-drive");
    ADD_FAILURE() << "an unknown decode path was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'warp-drive'"), std::string::npos) << message;
    for (const std::string& name : names) EXPECT_NE(message.find(name), std::string::npos);
  }
}

// The KV pool leaves room for what a choice's paths allocate after it: the megakernel's panel
// copies of QKV, O-proj, the dense MLP and the LM head, for a model it runs; nothing otherwise.
TEST(DecodePathRegistryTest, ReservesTheMegakernelsPanelCopies) {
  const ModelConfig north = NmcPreset();
  const int64_t per_layer = (4096 + 2 * 512) * 2048 + 2048 * 4096;  // QKV and O-proj elements
  const int64_t dense = 3 * 3072 * 2048, lm_head = int64_t{262144} * 2048;
  EXPECT_EQ(DecodePathBytes("megakernel", north), 2 * (49 * per_layer + dense + lm_head));
  EXPECT_EQ(DecodePathBytes("layered", north), 0);
  EXPECT_EQ(DecodePathBytes("eager", north), 0);
  EXPECT_EQ(DecodePathBytes("megakernel", TinyPreset()), 0);  // head_dim 16: declined
  EXPECT_THROW(DecodePathBytes("warp-drive", north), Error);
}

TEST(StepMetadataTest, BucketPlanPadsTablesToPowerOfTwoPages) {
  StepPlan plan;
  plan.num_sequences = 2;
  plan.max_context_tokens = 150;
  plan.max_pages = {3, 1};
  plan.block_tables = {{4, 2, 7, 1, 3, -1}, {5, 6}};
  const StepPlan bucketed = BucketPlan(plan);
  EXPECT_EQ(bucketed.max_pages, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(bucketed.block_tables[0], (std::vector<int32_t>{4, 2, 7, -1, 1, 3, -1, -1}));
  EXPECT_EQ(bucketed.block_tables[1], (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(bucketed.max_context_tokens, 4 * kBlockTokens);
  EXPECT_EQ(PagesBucket(1), 1);
  EXPECT_EQ(PagesBucket(5), 8);
  EXPECT_EQ(PagesBucket(64), 64);
}

TEST(StepMetadataTest, PackMetadataAlignsEveryArray) {
  StepPlan plan;
  plan.token_ids = {1, 2, 3};
  plan.positions = {10, 11, 12};
  plan.seq_of_token = {0, 0, 1};
  plan.logit_rows = {{2, 1, 0, {}}};
  plan.slots = {{7, 8, 9}};
  plan.block_tables = {{0, 1}};
  const PackedMetadata packed = PackMetadata(plan);
  ASSERT_EQ(packed.offsets.size(), 6u);
  for (size_t offset : packed.offsets) EXPECT_EQ(offset % 4, 0u);
  EXPECT_EQ(packed.values[packed.offsets[1] + 2], 12);
  EXPECT_EQ(packed.values[packed.offsets[3]], 2);  // the logits row's token index
  EXPECT_EQ(packed.values[packed.offsets[5] + 1], 1);
}

}  // namespace
}  // namespace mkserve::cuda
