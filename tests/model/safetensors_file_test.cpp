#include "model/safetensors_file.h"

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>

#include <gtest/gtest.h>

#include "common/error.h"
#include "model/safetensors_writer.h"
#include "model/test_tensors.h"

namespace mkserve {
namespace {

using testing_util::Bf16Ramp;
using testing_util::F32Values;
using testing_util::RawFile;

constexpr char kLabel[] = "shard-7.safetensors";

// Expects the bytes to be rejected with an Error naming the file and every fragment.
void ExpectRejected(const std::vector<std::byte>& bytes,
                    std::initializer_list<std::string> fragments) {
  try {
    ParseSafetensors(bytes, kLabel);
    ADD_FAILURE() << "accepted";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find(kLabel), std::string::npos) << message;
    for (const std::string& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "'" << fragment << "' not in: " << message;
    }
  }
}

std::vector<std::byte> SmallValidFile() {
  return SerializeSafetensors(
      {Bf16Ramp("a.weight", {2, 3}, 1.0f, 0.5f), F32Values("b.bias", {2}, {-1.5f, 4.0f})},
      {{"format", "pt"}});
}

// A two-tensor header with a hand-written JSON body, for corrupting fields one at a time.
std::string Entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

TEST(SafetensorsFileTest, ParsesWhatTheWriterWrote) {
  std::vector<std::byte> bytes = SmallValidFile();
  SafetensorsContents contents = ParseSafetensors(bytes, kLabel);
  ASSERT_EQ(contents.tensors.size(), 2u);
  EXPECT_EQ(contents.metadata.at("format"), "pt");
  const TensorView& a = contents.tensors[0];
  EXPECT_EQ(a.name, "a.weight");
  EXPECT_EQ(a.dtype, DType::kBF16);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.ToFloat(), (std::vector<float>{1.0f, 1.5f, 2.0f, 2.5f, 3.0f, 3.5f}));
  EXPECT_EQ(a.SliceRows(1, 1).ToFloat(), (std::vector<float>{2.5f, 3.0f, 3.5f}));
  EXPECT_EQ(contents.tensors[1].ToFloat(), (std::vector<float>{-1.5f, 4.0f}));
  EXPECT_EQ((bytes.size() - contents.tensors[0].bytes.size() - 8) % 8, 0u) << "header padded to 8";
}

TEST(SafetensorsFileTest, EveryTruncationIsAnError) {
  std::vector<std::byte> bytes = SmallValidFile();
  for (size_t length = 0; length < bytes.size(); ++length) {
    std::vector<std::byte> prefix(bytes.begin(), bytes.begin() + length);
    EXPECT_THROW(ParseSafetensors(prefix, kLabel), Error) << "truncated at " << length;
  }
  EXPECT_NO_THROW(ParseSafetensors(bytes, kLabel));
}

TEST(SafetensorsFileTest, TruncationAtHeaderBoundariesSaysWhy) {
  std::string header = "{" + Entry("w", "F32", "[2]", "[0,8]") + "}";
  std::string data(8, '\0');
  std::vector<std::byte> whole = RawFile(header, data);
  auto cut = [&](size_t length) {
    return std::vector<std::byte>(whole.begin(), whole.begin() + length);
  };
  ExpectRejected(cut(0), {"too short"});
  ExpectRejected(cut(7), {"too short"});
  ExpectRejected(cut(8), {"header length", "larger"});
  ExpectRejected(cut(8 + header.size() - 1), {"header length", "larger"});
  ExpectRejected(cut(8 + header.size()), {"tensor \"w\"", "data section"});
  ExpectRejected(cut(whole.size() - 1), {"tensor \"w\"", "truncated"});
}

TEST(SafetensorsFileTest, BadHeaderLengths) {
  std::string header = "{" + Entry("w", "F32", "[1]", "[0,4]") + "}";
  std::string data(4, '\0');
  ExpectRejected(RawFile(header.size() + 1, header, data), {"not valid JSON"});
  ExpectRejected(RawFile(header.size() - 1, header, data), {"not valid JSON"});
  ExpectRejected(RawFile(0, header, data), {"not valid JSON"});
  ExpectRejected(RawFile(~0ull, header, data), {"100 MB"});
  ExpectRejected(RawFile((100ull << 20) + 1, header, data), {"100 MB"});
  ExpectRejected(RawFile(1ull << 40, header, data), {"100 MB"});
}

TEST(SafetensorsFileTest, BadJson) {
  ExpectRejected(RawFile("{", ""), {"not valid JSON"});
  ExpectRejected(RawFile("[]", ""), {"not an object"});
  ExpectRejected(RawFile("null", ""), {"not an object"});
  ExpectRejected(RawFile("{\"w\": 1}", ""), {"tensor \"w\"", "not an object"});
  ExpectRejected(RawFile("{\"w\": {}}", ""), {"tensor \"w\"", "dtype"});
  ExpectRejected(RawFile(std::string(100000, '[') + std::string(100000, ']'), ""), {"nested"});
  ExpectRejected(RawFile("{\"w\":\"\xff\xfe\"}", ""), {"not valid JSON"});  // bad UTF-8
}

TEST(SafetensorsFileTest, BadEntries) {
  auto file = [](const std::string& entry, size_t data_bytes) {
    return RawFile("{" + entry + "}", std::string(data_bytes, '\0'));
  };
  ExpectRejected(file(Entry("w", "F64", "[1]", "[0,8]"), 8),
                 {"tensor \"w\"", "F64", "not supported"});
  ExpectRejected(file(Entry("w", "I32", "[1]", "[0,4]"), 4), {"tensor \"w\"", "I32"});
  ExpectRejected(file(Entry("w", "F32", "[2,3]", "[0,20]"), 20), {"tensor \"w\"", "needs 6 x 4"});
  ExpectRejected(file(Entry("w", "F32", "[-1]", "[0,4]"), 4), {"tensor \"w\"", "shape"});
  ExpectRejected(file(Entry("w", "F32", "[1.5]", "[0,4]"), 4), {"tensor \"w\"", "shape"});
  ExpectRejected(file(Entry("w", "F32", "3", "[0,4]"), 4), {"tensor \"w\"", "shape"});
  ExpectRejected(file(Entry("w", "F32", "[1]", "[4,0]"), 4), {"tensor \"w\"", "begin > end"});
  ExpectRejected(file(Entry("w", "F32", "[1]", "[0,4,8]"), 8), {"tensor \"w\"", "data_offsets"});
  ExpectRejected(file(Entry("w", "F32", "[1]", "[0,\"4\"]"), 4), {"tensor \"w\"", "data_offsets"});
  ExpectRejected(file(Entry("w", "F32", "[1]", "[0,8]"), 4), {"tensor \"w\"", "past the data"});
  ExpectRejected(file(Entry("w", "F32", "[1]", "[18446744073709551612,0]"), 4),
                 {"tensor \"w\"", "begin > end"});
  ExpectRejected(file(Entry("w", "BF16", "[4294967296,4294967296]", "[0,2]"), 2),
                 {"tensor \"w\"", "overflows"});
  ExpectRejected(file(Entry("w", "BF16", "[4294967296,2147483648]", "[0,2]"), 2),
                 {"tensor \"w\"", "needs"});  // element count fits, byte count does not
  ExpectRejected(RawFile("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", std::string(4, '\0')),
                 {"tensor \"w\"", "dtype"});
  ExpectRejected(
      RawFile("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", std::string(4, '\0')),
      {"tensor \"w\"", "shape"});
  ExpectRejected(RawFile("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", std::string(4, '\0')),
                 {"tensor \"w\"", "data_offsets"});
}

TEST(SafetensorsFileTest, LayoutMustTileTheDataSection) {
  std::string a = Entry("a", "F32", "[2]", "[0,8]");
  ExpectRejected(
      RawFile("{" + a + "," + Entry("b", "F32", "[2]", "[4,12]") + "}", std::string(12, '\0')),
      {"tensor \"b\"", "overlaps tensor \"a\""});
  ExpectRejected(
      RawFile("{" + a + "," + Entry("b", "F32", "[1]", "[12,16]") + "}", std::string(16, '\0')),
      {"tensor \"b\"", "hole"});
  ExpectRejected(RawFile("{" + a + "}", std::string(12, '\0')), {"4 bytes after the last tensor"});
  ExpectRejected(
      RawFile("{" + a + "," + Entry("b", "F32", "[2]", "[0,8]") + "}", std::string(8, '\0')),
      {"overlaps"});
  // Zero-sized tensors and an empty header are fine.
  SafetensorsContents contents = ParseSafetensors(
      RawFile("{" + a + "," + Entry("z", "BF16", "[0,5]", "[8,8]") + "}", std::string(8, '\0')),
      kLabel);
  EXPECT_EQ(contents.tensors.size(), 2u);
  EXPECT_TRUE(ParseSafetensors(RawFile("{}", ""), kLabel).tensors.empty());
}

TEST(SafetensorsFileTest, Metadata) {
  ExpectRejected(RawFile("{\"__metadata__\":{\"format\":1}}", ""), {"__metadata__", "format"});
  ExpectRejected(RawFile("{\"__metadata__\":[]}", ""), {"__metadata__"});
  EXPECT_EQ(
      ParseSafetensors(RawFile("{\"__metadata__\":{\"k\":\"v\"}}", ""), kLabel).metadata.at("k"),
      "v");
}

TEST(SafetensorsFileTest, OpenMapsTheFileAndNamesItInErrors) {
  std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "safetensors_open";
  std::filesystem::create_directories(dir);
  std::filesystem::path good = dir / "good.safetensors";
  WriteSafetensors(good, {Bf16Ramp("x", {4}, -2.0f, 1.0f)});
  std::unique_ptr<SafetensorsFile> file = SafetensorsFile::Open(good);
  EXPECT_EQ(file->tensors().at(0).ToFloat(), (std::vector<float>{-2, -1, 0, 1}));
  EXPECT_EQ(file->size_bytes(), std::filesystem::file_size(good));
  EXPECT_FALSE(std::filesystem::exists(dir / "good.safetensors.partial"));

  std::filesystem::path empty = dir / "empty.safetensors";
  std::ofstream(empty).close();
  for (const std::filesystem::path& bad : {empty, dir / "absent.safetensors", dir}) {
    try {
      SafetensorsFile::Open(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(bad.string()), std::string::npos) << error.what();
    }
  }
}

}  // namespace
}  // namespace mkserve
