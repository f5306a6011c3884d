#include "server/server_state.h"

#include "server/error.h"

namespace mkserve::server {

const ServedModel& ServerState::RequireModel() const {
  if (!is_ready()) {
    throw ApiError(ErrorKind::kUnavailable, "the model is still loading; retry shortly");
  }
  return *model_;
}

void ServerState::CheckModelName(const std::string& model) const {
  if (model.empty() || model == options_.model_id) return;
  throw ApiError(
      ErrorKind::kNotFound,
      "the model '" + model + "' does not exist; this server serves '" + options_.model_id + "'",
      "model");
}

}  // namespace mkserve::server
