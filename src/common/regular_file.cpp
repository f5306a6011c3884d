#include "common/regular_file.h"

#include <string>
#include <system_error>

#include "common/error.h"

namespace mkserve {

void RequireRegularFile(const std::filesystem::path& path) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (error && error != std::errc::no_such_file_or_directory) {
    throw Error(path.string() + ": " + error.message());  // a symlink loop, say
  }
  if (!std::filesystem::exists(status)) throw Error(path.string() + " does not exist");
  if (!std::filesystem::is_regular_file(status)) {
    throw Error(path.string() + " is not a regular file");
  }
}

bool EntryExists(const std::filesystem::path& path) {
  std::error_code error;
  return std::filesystem::exists(std::filesystem::symlink_status(path, error));
}

}  // namespace mkserve
