#include "backends/cpu/load_cpu_backend.h"

#include "model/checkpoint.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace mkserve {

std::unique_ptr<CpuBackend> LoadCpuBackend(const std::filesystem::path& model_dir,
                                           CpuBackendOptions options) {
  ModelConfig config = ModelConfig::LoadDir(model_dir);
  Checkpoint checkpoint = Checkpoint::Open(model_dir);
  ModelWeights weights = MapModelWeights(config, checkpoint);
  return std::make_unique<CpuBackend>(std::move(config), weights, options);
}

}  // namespace mkserve
