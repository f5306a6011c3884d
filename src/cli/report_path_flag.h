// --json FILE of the benchmark commands (bench, bench-serve): the report is written after minutes
// of measuring, so a path that cannot be written is refused before the first measurement.
#pragma once

#include <string>

namespace mkserve::cli {

// Throws mkserve::Error naming the flag unless `path` could be written now: an existing file that
// may be written, or a new name in a folder that may be. Creates nothing. "" passes (no report).
void CheckReportPath(const std::string& flag, const std::string& path);

}  // namespace mkserve::cli
