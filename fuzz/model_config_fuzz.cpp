// libFuzzer target for a checkpoint's config.json: any JSON is parsed into a ModelConfig or
// refused with mkserve::Error naming the key (never another exception, such as nlohmann's type
// errors, or a crash). An accepted config survives its HF form: FromJson(ToJson(config)) is the
// same config, so what mkserve writes (random checkpoints, `mkserve bench`) it reads back.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <nlohmann/json.hpp>
#include <string_view>

#include "common/error.h"
#include "model/model_config.h"

namespace {

[[noreturn]] void Fail(const char* what, const char* detail) {
  std::fprintf(stderr, "%s: %s\n", what, detail);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json json = nlohmann::json::parse(
      std::string_view(reinterpret_cast<const char*>(data), size), nullptr, false);
  if (json.is_discarded()) return 0;  // the file reader refuses text that is not JSON
  mkserve::ModelConfig config;
  try {
    config = mkserve::ModelConfig::FromJson(json);
  } catch (const mkserve::Error&) {
    return 0;  // refused by name
  } catch (const std::exception& e) {
    Fail("an exception other than mkserve::Error", e.what());
  }
  try {
    if (!(mkserve::ModelConfig::FromJson(config.ToJson()) == config))
      Fail("the HF form reads back as another config", config.ToJson().dump().c_str());
  } catch (const std::exception& e) {
    Fail("the HF form of an accepted config is refused", e.what());
  }
  return 0;
}
