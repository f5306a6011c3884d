// Runs the real `mkserve make-model` binary: output files, refusal to overwrite, --force.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "model/checkpoint.h"
#include "model/model_weights.h"
#include "model/presets.h"

namespace mkserve {
namespace {

namespace fs = std::filesystem;

int MakeModel(const std::string& flags) {
  std::string command =
      std::string(MKSERVE_BINARY_DIR) + "/mkserve make-model " + flags + " 2>/dev/null";
  int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(MakeModelCliTest, TinyWritesALoadableModelAndTokenizer) {
  fs::path dir = fs::path(testing::TempDir()) / "make_model_tiny";
  fs::remove_all(dir);
  ASSERT_EQ(MakeModel("--preset tiny --seed 3 --out " + dir.string()), 0);
  for (const char* file :
       {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"}) {
    EXPECT_TRUE(fs::exists(dir / file)) << file;
  }
  ModelConfig config = ModelConfig::Load(dir / "config.json");
  EXPECT_EQ(config, TinyPreset());
  Checkpoint checkpoint = Checkpoint::Open(dir);
  EXPECT_EQ(MapModelWeights(config, checkpoint).layers.size(), 6u);

  EXPECT_EQ(MakeModel("--preset tiny --out " + dir.string()), 1) << "must refuse a non-empty dir";
  EXPECT_EQ(MakeModel("--preset tiny --force --shard-mb 1 --fused-experts --out " + dir.string()),
            0);
  Checkpoint fused = Checkpoint::Open(dir);
  EXPECT_NE(fused.Find("model.layers.1.mlp.experts.gate_up_proj"), nullptr);
}

TEST(MakeModelCliTest, BadFlagsFail) {
  fs::path dir = fs::path(testing::TempDir()) / "make_model_bad";
  fs::remove_all(dir);
  EXPECT_EQ(MakeModel("--preset huge --out " + dir.string()), 1);
  EXPECT_EQ(MakeModel("--preset tiny --layers 0 --out " + dir.string()), 1);
  EXPECT_EQ(MakeModel("--preset tiny --shard-mb -1 --out " + dir.string()), 1);
  EXPECT_EQ(MakeModel("--preset tiny"), 1);
  EXPECT_EQ(MakeModel("--preset tiny --colour red --out " + dir.string()), 1);
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
}

}  // namespace
}  // namespace mkserve
