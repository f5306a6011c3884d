// LoadCudaBackend: a checkpoint directory, or random weights at a given geometry, onto the GPU.
#include <string>

#include "backends/cuda/core/device_info.h"
#include "backends/cuda/cuda_backend.h"
#include "common/error.h"
#include "model/checkpoint.h"
#include "model/model_weights.h"
#include "model/presets.h"

namespace mkserve::cuda {

std::unique_ptr<CudaBackend> LoadCudaBackend(const std::filesystem::path& model_dir,
                                             const CudaBackendOptions& options) {
  CurrentDeviceInfo();  // no GPU: say so before reading or generating any weights
  if (options.random_weights) {
    ModelConfig config = model_dir.empty() ? NmcPreset() : ModelConfig::LoadDir(model_dir);
    DeviceWeights weights = DeviceWeights::Random(config, options.seed);
    return std::make_unique<CudaBackend>(std::move(config), std::move(weights), options);
  }
  if (model_dir.empty()) throw Error("LoadCudaBackend: no model directory and no --random-weights");
  ModelConfig config = ModelConfig::LoadDir(model_dir);
  DeviceWeights weights = [&] {
    Checkpoint checkpoint = Checkpoint::Open(model_dir);
    ModelWeights host = MapModelWeights(config, checkpoint);
    return DeviceWeights::Upload(config, host, options.progress);
  }();  // the checkpoint's mappings close here, before the KV pool is sized
  return std::make_unique<CudaBackend>(std::move(config), std::move(weights), options);
}

}  // namespace mkserve::cuda
