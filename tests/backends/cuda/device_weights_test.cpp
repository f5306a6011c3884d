// DeviceWeights: a random checkpoint uploaded and read back lands in the documented layout
// (fused [q;k;v]; per expert gate/up and down in panels, unpacked here), bit for bit; random
// device weights are seeded and plausible; the KV pool maps layers to groups and slices.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "backends/cuda/core/device_weights.h"
#include "backends/cuda/core/kv_pool.h"
#include "backends/cuda/core/random_fill.h"
#include "backends/cuda/core/weight_layout.h"
#include "common/error.h"
#include "gpu_test_util.h"
#include "model/checkpoint.h"
#include "model/presets.h"
#include "model/random_checkpoint.h"

namespace mkserve::cuda::testing {
namespace {

std::vector<float> Download(const bf16* p, int64_t n) {
  std::vector<uint16_t> bits(n);
  MKSERVE_CUDA_CHECK(cudaMemcpy(bits.data(), p, n * 2, cudaMemcpyDeviceToHost));
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(bits[i]);
  return out;
}

void ExpectSame(const bf16* device, const TensorView& host, const char* what) {
  ExpectClose(Download(device, host.num_elements()), host.ToFloat(), 0.0f, 0.0f, what);
}

TEST(DeviceWeightsTest, UploadFollowsTheLayout) {
  const ModelConfig config = TinyPreset(3);
  const auto dir = std::filesystem::temp_directory_path() / "mkserve_cuda_upload_test";
  RandomCheckpointOptions options;
  options.seed = 5;
  WriteRandomCheckpoint(config, options, dir);
  Checkpoint checkpoint = Checkpoint::Open(dir);
  ModelWeights host = MapModelWeights(config, checkpoint);
  int64_t last_done = 0, calls = 0;
  DeviceWeights dev = DeviceWeights::Upload(config, host, [&](int64_t done, int64_t total) {
    EXPECT_GT(done, last_done);
    EXPECT_LE(done, total);
    last_done = done;
    ++calls;
  });
  EXPECT_GT(calls, 10);
  ExpectSame(dev.embed(), host.embed_tokens, "embed");
  ExpectSame(dev.final_norm(), host.final_norm, "final_norm");
  EXPECT_EQ(dev.lm_head(), dev.embed());  // tied
  const DeviceLayer& l0 = dev.layers()[0];
  const int64_t qn = host.layers[0].q_proj.num_elements(),
                kn = host.layers[0].k_proj.num_elements();
  ExpectSame(l0.qkv, host.layers[0].q_proj, "q");
  ExpectSame(l0.qkv + qn, host.layers[0].k_proj, "k");
  ExpectSame(l0.qkv + qn + kn, host.layers[0].v_proj, "v");
  ExpectSame(l0.o_proj, host.layers[0].o_proj, "o");
  ExpectSame(l0.dense.gate_up, host.layers[0].dense->gate, "dense gate");
  ExpectSame(l0.dense.gate_up + host.layers[0].dense->gate.num_elements(), host.layers[0].dense->up,
             "dense up");
  ExpectSame(l0.dense.down, host.layers[0].dense->down, "dense down");
  const DeviceLayer& l1 = dev.layers()[1];
  const PanelMatrix gate_up = ExpertGateUpPanels(config.hidden_size, l1.expert_intermediate);
  const PanelMatrix down = ExpertDownPanels(config.hidden_size, l1.expert_intermediate);
  const auto& e3 = host.layers[1].experts[3];
  ExpectSame(*&l1.router, *host.layers[1].router, "router");
  std::vector<float> want = e3.gate.ToFloat(), up = e3.up.ToFloat();
  want.insert(want.end(), up.begin(), up.end());
  ExpectClose(
      UnpackPanelsOnHost(Download(l1.experts_gate_up + 3 * gate_up.Elements(), gate_up.Elements()),
                         gate_up),
      want, 0.0f, 0.0f, "expert 3 gate and up");
  ExpectClose(
      UnpackPanelsOnHost(Download(l1.experts_down + 3 * down.Elements(), down.Elements()), down),
      e3.down.ToFloat(), 0.0f, 0.0f, "expert 3 down");
  ExpectSame(l1.input_norm, host.layers[1].input_norm, "input norm");
  std::filesystem::remove_all(dir);
}

// A NaN or an infinity anywhere in a checkpoint (here one element of an expert, packed into panels
// after its check) fails the upload naming the tensor, instead of serving garbage.
TEST(DeviceWeightsTest, NonFiniteWeightsAreRefusedByName) {
  const ModelConfig config = TinyPreset(3);
  const auto dir = std::filesystem::temp_directory_path() / "mkserve_cuda_nonfinite_test";
  WriteRandomCheckpoint(config, RandomCheckpointOptions{}, dir);
  Checkpoint checkpoint = Checkpoint::Open(dir);
  ModelWeights host = MapModelWeights(config, checkpoint);
  EXPECT_NO_THROW(DeviceWeights::Upload(config, host, {}));
  for (uint16_t poison : {uint16_t{0x7fc0}, uint16_t{0xff80}}) {  // NaN, -inf
    for (TensorView* view : {&host.layers[1].experts[3].down, &host.layers[2].o_proj}) {
      std::vector<std::byte> bytes(view->bytes.begin(), view->bytes.end());
      const std::span<const std::byte> pristine = view->bytes;
      std::memcpy(bytes.data() + 2 * (view->num_elements() - 1), &poison, 2);  // the last element
      view->bytes = bytes;
      try {
        DeviceWeights::Upload(config, host, {});
        ADD_FAILURE() << "no error for " << view->name;
      } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("'" + view->name + "' holds NaN or infinite"),
                  std::string::npos)
            << error.what();
      }
      view->bytes = pristine;
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(DeviceWeightsTest, RandomIsSeededAndPlausible) {
  const ModelConfig config = TinyPreset(2);
  DeviceWeights a = DeviceWeights::Random(config, 9), b = DeviceWeights::Random(config, 9);
  DeviceWeights c = DeviceWeights::Random(config, 10);
  const int64_t n = config.vocab_size * config.hidden_size;
  std::vector<float> ea = Download(a.embed(), n), eb = Download(b.embed(), n),
                     ec = Download(c.embed(), n);
  EXPECT_EQ(ea, eb);
  EXPECT_NE(ea, ec);
  double sum = 0, squares = 0;
  for (float v : ea) sum += v, squares += v * v;
  EXPECT_NEAR(sum / n, 0.0, 0.002);
  EXPECT_NEAR(std::sqrt(squares / n), 0.02, 0.002);
  std::vector<float> norm = Download(a.layers()[1].input_norm, config.hidden_size);
  for (float v : norm) EXPECT_NEAR(v, 1.0f, 0.15f);
  EXPECT_NEAR(NormalAt(9, 0, 123) * 0.02f, ea[123], 5e-4f);  // host and device draw agree
}

TEST(KvPoolTest, GroupsAndLayerSlices) {
  const ModelConfig config = TinyPreset(6);
  const int64_t per_token = KvPool::BytesPerTokenPerLayer(config);
  EXPECT_EQ(per_token, 2 * config.kv_width() * 2);
  KvLayout layout = PlanKvLayout(config, 16 << 20, per_token, 4);
  KvPool pool = KvPool::Create(config, layout);
  for (int64_t g = 0; g < layout.num_groups(); ++g) {
    const auto& ids = layout.groups[g].layer_ids;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      EXPECT_EQ(pool.group_of_layer(ids[i]), g);
      EXPECT_EQ(pool.layer_cache(ids[i + 1]) - pool.layer_cache(ids[i]),
                layout.groups[g].num_blocks * pool.block_elements());
    }
  }
  EXPECT_EQ(pool.block_elements(), kBlockTokens * 2 * config.kv_width());
  layout.groups[0].num_blocks = 0;
  EXPECT_THROW(KvPool::Create(config, layout), Error);
}

}  // namespace
}  // namespace mkserve::cuda::testing
