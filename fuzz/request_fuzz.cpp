// libFuzzer target for the request parsers of the OpenAI endpoints: any JSON body is parsed into
// a request or refused with ApiError / mkserve::Error (a 400); any other exception would be
// answered as a 500 internal error, a crash takes the server down. Byte 0 picks the endpoint.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "common/error.h"
#include "server/chat_request.h"
#include "server/completion_request.h"
#include "server/error.h"
#include "server/json_fields.h"
#include "server/responses_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using mkserve::server::Json;
  if (size == 0) return 0;
  try {
    // As the server reads a body: bounded nesting, malformed JSON a 400.
    const Json body = mkserve::server::ParseJsonBody(
        std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
    switch (data[0] % 5) {
      case 0:
        mkserve::server::ParseChatRequest(body);
        break;
      case 1:
        mkserve::server::ParseCompletionRequest(body);
        break;
      case 2:
        mkserve::server::ParseResponsesRequest(body);
        break;
      case 3:
        mkserve::server::ParseTokenizeRequest(body);
        break;
      case 4:
        mkserve::server::ParseDetokenizeRequest(body);
        break;
    }
  } catch (const mkserve::server::ApiError&) {
  } catch (const mkserve::Error&) {
  } catch (const std::exception& error) {
    std::fprintf(stderr, "not a 400: %s\n", error.what());
    std::abort();
  }
  return 0;
}
