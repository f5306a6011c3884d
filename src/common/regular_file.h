// The files a model loader reads must be regular ones (symlinks followed): a FIFO would block its
// open forever, a directory reads as nothing, a symlink loop throws std::filesystem_error. Each
// becomes a mkserve::Error naming the path.
#pragma once

#include <filesystem>

namespace mkserve {

// Throws mkserve::Error unless `path` names a regular file.
void RequireRegularFile(const std::filesystem::path& path);

// Whether a directory entry is there at all (a dangling or looping symlink counts), without
// throwing: the loader then opens it and reports what is wrong with it.
bool EntryExists(const std::filesystem::path& path);

}  // namespace mkserve
