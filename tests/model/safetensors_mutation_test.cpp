// Deterministic fuzzing for CI: seeded random mutations of a valid file must either parse (and
// then every tensor reads within bounds) or raise mkserve::Error. A crash, hang or any other
// exception fails. The libFuzzer target in fuzz/ explores further when built with clang.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "common/error.h"
#include "model/safetensors_file.h"
#include "model/test_tensors.h"

namespace mkserve {
namespace {

constexpr int kNumMutations = 4000;

std::vector<std::byte> ValidFile() {
  return SerializeSafetensors(
      {testing_util::Bf16Ramp("model.embed_tokens.weight", {4, 3}, 0.0f, 0.25f),
       testing_util::F32Values("model.norm.weight", {3}, {1.0f, 2.0f, 3.0f}),
       testing_util::Bf16Ramp("model.layers.0.mlp.gate.weight", {2, 3}, -1.0f, 0.5f)},
      {{"format", "pt"}});
}

// Applies one of several corruptions; header-targeted ones dominate since the header is where
// parsing can go wrong.
void Mutate(std::vector<std::byte>& bytes, std::mt19937_64& rng) {
  auto pick = [&](size_t limit) { return limit == 0 ? 0 : static_cast<size_t>(rng() % limit); };
  if (bytes.size() <= 8) {  // too short for the other corruptions: grow it
    bytes.push_back(static_cast<std::byte>(rng()));
    return;
  }
  size_t declared =
      static_cast<uint8_t>(bytes[0]) | static_cast<size_t>(static_cast<uint8_t>(bytes[1])) << 8;
  size_t header_end = std::clamp<size_t>(8 + declared, 9, bytes.size());
  switch (rng() % 7) {
    case 0:  // flip one bit anywhere
      bytes[pick(bytes.size())] ^= static_cast<std::byte>(1u << pick(8));
      break;
    case 1:  // replace a header byte with a JSON-significant character
      bytes[8 + pick(header_end - 8)] = static_cast<std::byte>("{}[]\",:0123456789-e. "[pick(21)]);
      break;
    case 2:  // truncate
      bytes.resize(pick(bytes.size()));
      break;
    case 3: {  // nudge the 8-byte header length
      int64_t delta = static_cast<int64_t>(pick(33)) - 16;
      bytes[0] = static_cast<std::byte>(static_cast<uint8_t>(bytes[0]) + delta);
      break;
    }
    case 4:  // a random byte of the length prefix
      bytes[pick(8)] = static_cast<std::byte>(rng());
      break;
    case 5: {  // duplicate a slice of the header into itself
      size_t from = 8 + pick(header_end - 8), to = 8 + pick(header_end - 8);
      size_t length = std::min({pick(16), header_end - from, header_end - to});
      std::copy_n(bytes.begin() + from, length, bytes.begin() + to);
      break;
    }
    default:  // append garbage
      for (size_t i = 0, n = 1 + pick(16); i < n; ++i)
        bytes.push_back(static_cast<std::byte>(rng()));
  }
}

TEST(SafetensorsMutationTest, MutatedFilesParseOrRaiseError) {
  const std::vector<std::byte> valid = ValidFile();
  int accepted = 0, rejected = 0;
  for (int seed = 0; seed < kNumMutations; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::byte> bytes = valid;
    for (int round = 0, rounds = 1 + static_cast<int>(rng() % 3); round < rounds && !bytes.empty();
         ++round) {
      Mutate(bytes, rng);
    }
    try {
      SafetensorsContents contents = ParseSafetensors(bytes, "mutant.safetensors");
      for (const TensorView& tensor : contents.tensors) {
        ASSERT_EQ(tensor.bytes.size(),
                  static_cast<size_t>(tensor.num_elements()) * DTypeSize(tensor.dtype));
        ASSERT_GE(tensor.bytes.data(), bytes.data());
        ASSERT_LE(tensor.bytes.data() + tensor.bytes.size(), bytes.data() + bytes.size());
        tensor.ToFloat();
      }
      ++accepted;
    } catch (const Error& error) {
      ASSERT_NE(std::string(error.what()).find("mutant.safetensors"), std::string::npos)
          << error.what();
      ++rejected;
    } catch (const std::exception& error) {
      FAIL() << "seed " << seed << ": non-mkserve exception: " << error.what();
    }
  }
  // Both outcomes must occur, or the mutations are not exercising the reader.
  EXPECT_GT(accepted, 50);
  EXPECT_GT(rejected, kNumMutations / 2);
}

}  // namespace
}  // namespace mkserve
