#include "cli/report_path_flag.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "common/error.h"

namespace mkserve::cli {

void CheckReportPath(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path file(path);
  bool writable;
  if (fs::exists(file, error)) {
    writable = !fs::is_directory(file, error) && ::access(file.c_str(), W_OK) == 0;
  } else {
    const fs::path folder = file.has_parent_path() ? file.parent_path() : fs::path(".");
    writable = fs::is_directory(folder, error) && ::access(folder.c_str(), W_OK) == 0;
  }
  if (!writable) throw Error(flag + ": cannot write " + path);
}

}  // namespace mkserve::cli
