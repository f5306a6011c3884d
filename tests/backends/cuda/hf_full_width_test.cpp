// CudaBackend against HF transformers at North Mini Code's full width (issue 5): a 5-layer
// random bf16 model (dense + forced RoPE, sliding, full NoPE; 128 experts top-8; vocab 262144)
// and float32 HF logits written by tools/oracle/full_width_reference.py on the GPU machine.
// Teacher-forced: per-position logit cosine >= 0.999 and top-1 agreement >= 98 %, for 128
// positions of a short prompt and the last 64 positions of a 9216-token prompt (the sliding
// layers cross their 4096 window). MKSERVE_HF_REFERENCE_DIR names the script's --out folder;
// scripts/gpu_check.sh sets it after running the script.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend_test_util.h"
#include "backends/cuda/cuda_backend.h"
#include "gpu_test_util.h"

namespace mkserve::cuda::testing {
namespace {

constexpr double kMinCosine = 0.999;
constexpr double kMinTop1Agreement = 0.98;
constexpr int64_t kChunkTokens = 2048;
constexpr int64_t kKvBlocksPerGroup = 400;  // 9216 + 128 tokens are 146 blocks of 64

std::filesystem::path ReferenceDir() {
  const char* dir = std::getenv("MKSERVE_HF_REFERENCE_DIR");
  return dir ? dir : "";
}

std::vector<float> ReadFloats(const std::filesystem::path& path, size_t count) {
  std::vector<float> values(count);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(count * 4));
  if (!in) throw std::runtime_error("short read of " + path.string());
  return values;
}

int64_t Argmax(const float* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

// Prefills `ids` in chunks; the last chunk starts at the first wanted position and returns logits.
std::vector<std::vector<float>> TeacherForcedLogits(CudaBackend& backend, SimpleBlocks& blocks,
                                                    const std::vector<int32_t>& ids,
                                                    int64_t first_wanted, int64_t sequence_id) {
  const auto tables = blocks.Allocate(static_cast<int64_t>(ids.size()));
  int64_t start = 0;
  while (start < static_cast<int64_t>(ids.size())) {
    const bool last = start >= first_wanted;
    const int64_t end =
        last ? static_cast<int64_t>(ids.size()) : std::min(first_wanted, start + kChunkTokens);
    std::vector<int32_t> chunk(ids.begin() + start, ids.begin() + end);
    StepInputs inputs;
    inputs.sequences.push_back(MakeStep(sequence_id, chunk, start, tables, nullptr, last));
    StepOutputs outputs = backend.Step(inputs);
    if (last) return std::move(outputs.results.at(0).logits);
    start = end;
  }
  return {};
}

TEST(HfFullWidthTest, TeacherForcedLogitsMatchTransformers) {
  const std::filesystem::path dir = ReferenceDir();
  ASSERT_FALSE(dir.empty()) << "set MKSERVE_HF_REFERENCE_DIR to the output folder of "
                               "tools/oracle/full_width_reference.py";
  std::ifstream in(dir / "reference.json");
  ASSERT_TRUE(in) << "no reference.json in " << dir;
  const nlohmann::json reference = nlohmann::json::parse(in);
  const ModelConfig config = ModelConfig::Load(dir / "model" / "config.json");
  CudaBackendOptions options;
  // SimpleBlocks never releases, so every group (sliding too) holds both whole sequences.
  KvLayout layout = PlanKvLayout(config, int64_t{4} << 30, 2 * config.kv_width() * 2, 2);
  for (KvGroup& group : layout.groups) group.num_blocks = kKvBlocksPerGroup;
  options.kv_layout = layout;
  options.max_num_tokens = kChunkTokens;
  auto backend = LoadCudaBackend(dir / "model", options);
  SimpleBlocks blocks(backend->kv_layout());
  int64_t sequence_id = 1;
  for (const auto& sequence : reference.at("sequences")) {
    const std::string name = sequence.at("name");
    const auto ids = sequence.at("ids").get<std::vector<int32_t>>();
    const auto positions = sequence.at("positions").get<std::vector<int64_t>>();
    const int64_t vocab = sequence.at("vocab");
    const std::vector<float> want =
        ReadFloats(dir / sequence.at("logits_file").get<std::string>(), positions.size() * vocab);
    const auto got = TeacherForcedLogits(*backend, blocks, ids, positions.front(), sequence_id++);
    ASSERT_EQ(got.size(), ids.size() - positions.front()) << name;
    double min_cosine = 1.0;
    int64_t agree = 0, below = 0;
    std::string below_positions;
    for (size_t i = 0; i < positions.size(); ++i) {
      const std::vector<float>& row = got[positions[i] - positions.front()];
      const std::vector<float> ref(want.begin() + i * vocab, want.begin() + (i + 1) * vocab);
      const double cosine = Cosine(row, ref);
      min_cosine = std::min(min_cosine, cosine);
      if (cosine < kMinCosine) {
        ++below;
        below_positions += " " + std::to_string(positions[i]);
      }
      agree += Argmax(row.data(), vocab) == Argmax(ref.data(), vocab);
    }
    const double agreement = static_cast<double>(agree) / positions.size();
    std::printf(
        "%s: %zu tokens, %zu positions, min cosine %.6f, positions below %.3f: %lld, "
        "top-1 agreement %.4f\n",
        name.c_str(), ids.size(), positions.size(), min_cosine, kMinCosine,
        static_cast<long long>(below), agreement);
    EXPECT_EQ(below, 0) << name << ": positions with cosine < " << kMinCosine << ":"
                        << below_positions;
    EXPECT_GE(agreement, kMinTop1Agreement) << name;
  }
}

}  // namespace
}  // namespace mkserve::cuda::testing
