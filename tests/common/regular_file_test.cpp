// A model file in the wrong shape (a FIFO, a directory, a symlink loop, nothing) is a named Error
// before anything opens it: a FIFO blocked serve's start-up forever, a loop ended it as an internal
// error.
#include "common/regular_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.h"

namespace mkserve {
namespace {

namespace fs = std::filesystem;

void ExpectRefused(const fs::path& path, const std::string& fragment) {
  try {
    RequireRegularFile(path);
    ADD_FAILURE() << path << " was taken for a regular file";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

TEST(RegularFileTest, OnlyRegularFilesPass) {
  const fs::path dir = fs::temp_directory_path() / "mkserve_regular_file_test";
  fs::remove_all(dir);
  fs::create_directories(dir / "a_directory");
  std::ofstream(dir / "config.json") << "{}";
  RequireRegularFile(dir / "config.json");
  fs::create_symlink(dir / "config.json", dir / "link.json");
  RequireRegularFile(dir / "link.json");
  ASSERT_EQ(mkfifo((dir / "fifo.json").c_str(), 0600), 0);
  ExpectRefused(dir / "fifo.json", "not a regular file");
  ExpectRefused(dir / "a_directory", "not a regular file");
  ExpectRefused(dir / "missing.json", "does not exist");
  fs::create_symlink(dir / "loop.json", dir / "loop.json");
  ExpectRefused(dir / "loop.json", "symbolic links");
  EXPECT_TRUE(EntryExists(dir / "loop.json"));
  EXPECT_FALSE(EntryExists(dir / "missing.json"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mkserve
