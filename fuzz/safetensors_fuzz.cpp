// libFuzzer target for the safetensors header reader: any input must either parse into views
// that stay inside the input, or raise mkserve::Error. Build with -DMKSERVE_FUZZ=ON and clang;
// run with `bash scripts/fuzz.sh safetensors_fuzz`.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "common/error.h"
#include "model/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    mkserve::SafetensorsContents contents = mkserve::ParseSafetensors(bytes, "fuzz.safetensors");
    for (const mkserve::TensorView& tensor : contents.tensors) {
      const std::byte* end = tensor.bytes.data() + tensor.bytes.size();
      if (tensor.bytes.data() < bytes.data() || end > bytes.data() + bytes.size()) std::abort();
      if (tensor.num_elements() > 0) tensor.At(tensor.num_elements() - 1);
    }
  } catch (const mkserve::Error&) {
    // Rejecting bad input with a clear error is the expected outcome.
  }
  return 0;
}
