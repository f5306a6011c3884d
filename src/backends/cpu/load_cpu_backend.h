// LoadCpuBackend: a model directory (config.json + safetensors) straight into a CpuBackend.
#pragma once

#include <filesystem>
#include <memory>

#include "backends/cpu/cpu_backend.h"

namespace mkserve {

// Parses DIR/config.json, opens and maps the checkpoint, and converts it to fp32. The backend owns
// fp32 copies of every tensor, so the checkpoint is closed again before this returns.
std::unique_ptr<CpuBackend> LoadCpuBackend(const std::filesystem::path& model_dir,
                                           CpuBackendOptions options);

}  // namespace mkserve
