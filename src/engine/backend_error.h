// BackendFatalError: the backend's device is in a state it cannot recover from inside this process
// (e.g. a decode step that never finished). Callers stop serving rather than retry.
#pragma once

#include "common/error.h"

namespace mkserve {

class BackendFatalError : public Error {
 public:
  using Error::Error;
};

}  // namespace mkserve
