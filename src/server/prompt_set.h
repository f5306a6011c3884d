// A prompt set for `mkserve bench-serve`: a JSON Lines file, one {"prompt": "..."} object a line
// (blank lines are skipped); each prompt is sent as one user message.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace mkserve::server {

// Throws mkserve::Error naming the file and line of a bad entry, or when there is none.
std::vector<std::string> LoadPromptSet(const std::filesystem::path& path);

}  // namespace mkserve::server
