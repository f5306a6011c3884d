#include "model/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <initializer_list>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/safetensors_writer.h"
#include "model/test_tensors.h"

namespace mkserve {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing_util::Bf16Ramp;

class CheckpointTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) /
           ("checkpoint_" +
            std::string(testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  // Two shards: a + b in shard 1, c in shard 2, and an index saying so (editable first).
  void WriteSharded(json weight_map) {
    WriteSafetensors(dir_ / "s1.safetensors", {Bf16Ramp("a", {2}, 1, 1), Bf16Ramp("b", {3}, 5, 1)});
    WriteSafetensors(dir_ / "s2.safetensors", {Bf16Ramp("c", {2, 2}, -1, 0.5f)});
    std::ofstream(dir_ / "model.safetensors.index.json")
        << json{{"metadata", {{"total_size", 18}}}, {"weight_map", weight_map}}.dump();
  }

  static json GoodMap() {
    return {{"a", "s1.safetensors"}, {"b", "s1.safetensors"}, {"c", "s2.safetensors"}};
  }

  void ExpectOpenError(std::initializer_list<std::string> fragments) {
    try {
      Checkpoint::Open(dir_);
      ADD_FAILURE() << "opened";
    } catch (const Error& error) {
      for (const std::string& fragment : fragments) {
        EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos)
            << "'" << fragment << "' not in: " << error.what();
      }
    }
  }

  fs::path dir_;
};

TEST_F(CheckpointTest, SingleFile) {
  WriteSafetensors(dir_ / "model.safetensors", {Bf16Ramp("x", {3}, 0, 2)});
  Checkpoint checkpoint = Checkpoint::Open(dir_);
  ASSERT_NE(checkpoint.Find("x"), nullptr);
  EXPECT_EQ(checkpoint.Find("x")->ToFloat(), (std::vector<float>{0, 2, 4}));
  EXPECT_EQ(checkpoint.Find("y"), nullptr);
  EXPECT_EQ(checkpoint.files(), std::vector<fs::path>{dir_ / "model.safetensors"});
}

TEST_F(CheckpointTest, ShardedViewsSurviveAMove) {
  WriteSharded(GoodMap());
  Checkpoint opened = Checkpoint::Open(dir_);
  Checkpoint checkpoint = std::move(opened);
  EXPECT_EQ(checkpoint.tensors().size(), 3u);
  EXPECT_EQ(checkpoint.Find("b")->ToFloat(), (std::vector<float>{5, 6, 7}));
  EXPECT_EQ(checkpoint.Find("c")->ToFloat(), (std::vector<float>{-1, -0.5f, 0, 0.5f}));
  EXPECT_EQ(checkpoint.files(),
            (std::vector<fs::path>{dir_ / "s1.safetensors", dir_ / "s2.safetensors"}));
}

TEST_F(CheckpointTest, EmptyDirectory) { ExpectOpenError({dir_.string(), "model.safetensors"}); }

TEST_F(CheckpointTest, MissingShard) {
  json map = GoodMap();
  map["c"] = "s3.safetensors";
  WriteSharded(map);
  ExpectOpenError({"s3.safetensors", "\"c\"", "does not exist"});
}

TEST_F(CheckpointTest, TensorInTheWrongShard) {
  json map = GoodMap();
  map["b"] = "s2.safetensors";
  WriteSharded(map);
  ExpectOpenError({"\"b\"", "s1.safetensors", "listed in s2.safetensors"});
}

TEST_F(CheckpointTest, TensorMissingFromTheIndex) {
  json map = GoodMap();
  map.erase("a");
  WriteSharded(map);
  ExpectOpenError({"\"a\"", "not listed"});
}

TEST_F(CheckpointTest, IndexedTensorAbsentFromItsShard) {
  json map = GoodMap();
  map["ghost"] = "s2.safetensors";
  WriteSharded(map);
  ExpectOpenError({"\"ghost\"", "does not contain"});
}

TEST_F(CheckpointTest, BadIndex) {
  WriteSharded(GoodMap());
  std::ofstream(dir_ / "model.safetensors.index.json") << "{\"weight_map\": {";
  ExpectOpenError({"model.safetensors.index.json", "not valid JSON"});
  std::ofstream(dir_ / "model.safetensors.index.json") << "{\"metadata\": {}}";
  ExpectOpenError({"model.safetensors.index.json", "weight_map"});
  std::ofstream(dir_ / "model.safetensors.index.json")
      << json{{"weight_map", {{"a", "../s1.safetensors"}}}}.dump();
  ExpectOpenError({"\"a\"", "../s1.safetensors", "not a file name"});
}

TEST_F(CheckpointTest, CorruptShardNamesTheShard) {
  WriteSharded(GoodMap());
  fs::resize_file(dir_ / "s2.safetensors", fs::file_size(dir_ / "s2.safetensors") - 1);
  ExpectOpenError({"s2.safetensors", "tensor \"c\""});
}

}  // namespace
}  // namespace mkserve
