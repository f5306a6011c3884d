// BackendFatalError: a backend failure after which the backend cannot run another step (a sticky
// CUDA error, a wedged device). The engine fails every request in flight, stops admitting, and the
// server reports unhealthy and exits non-zero so a supervisor restarts the process. Any other
// mkserve::Error thrown by Backend::Step is transient: it fails only the requests of that step.
#pragma once

#include "common/error.h"

namespace mkserve {

class BackendFatalError : public Error {
 public:
  using Error::Error;
};

}  // namespace mkserve
