#include "server/error.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace mkserve::server {
namespace {

TEST(ErrorTest, EveryKindMapsToItsStatusAndType) {
  struct Case {
    ErrorKind kind;
    int status;
    std::string type;
  };
  for (const Case& c :
       std::vector<Case>{{ErrorKind::kInvalidRequest, 400, "invalid_request_error"},
                         {ErrorKind::kUnauthorized, 401, "authentication_error"},
                         {ErrorKind::kNotFound, 404, "not_found_error"},
                         {ErrorKind::kMethodNotAllowed, 405, "invalid_request_error"},
                         {ErrorKind::kRequestTimeout, 408, "invalid_request_error"},
                         {ErrorKind::kPayloadTooLarge, 413, "invalid_request_error"},
                         {ErrorKind::kUnavailable, 503, "unavailable_error"},
                         {ErrorKind::kInternal, 500, "server_error"}}) {
    EXPECT_EQ(StatusOf(c.kind).http_status, c.status);
    EXPECT_EQ(StatusOf(c.kind).openai_type, c.type);
  }
}

TEST(ErrorTest, BodyHasOpenAiShapeWithParam) {
  nlohmann::json body = nlohmann::json::parse(
      ErrorBody(ApiError(ErrorKind::kInvalidRequest, "'top_p': too big", "top_p")));
  ASSERT_TRUE(body.contains("error"));
  EXPECT_EQ(body["error"]["message"], "'top_p': too big");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "top_p");
  EXPECT_TRUE(body["error"].contains("code"));
}

TEST(ErrorTest, MissingParamIsNullAndModelNotFoundHasCode) {
  nlohmann::json plain = nlohmann::json::parse(ErrorBody(ApiError(ErrorKind::kInternal, "bug")));
  EXPECT_TRUE(plain["error"]["param"].is_null());
  nlohmann::json model =
      nlohmann::json::parse(ErrorBody(ApiError(ErrorKind::kNotFound, "no model x", "model")));
  EXPECT_EQ(model["error"]["code"], "model_not_found");
}

TEST(ErrorTest, InvalidUtf8InMessageDoesNotThrow) {
  std::string body = ErrorBody(ApiError(ErrorKind::kInvalidRequest, "bad \xff byte"));
  EXPECT_NO_THROW(nlohmann::json::parse(body));
}

// A client's id can carry a NUL ("/v1/responses/%00"): the message goes out whole, escaped.
TEST(ErrorTest, AMessageWithANulGoesOutWhole) {
  const std::string message = std::string("no stored response '") + '\0' + "x': gone";
  nlohmann::json body = nlohmann::json::parse(ErrorBody(ApiError(ErrorKind::kNotFound, message)));
  EXPECT_EQ(body["error"]["message"].get<std::string>(), message);
}

}  // namespace
}  // namespace mkserve::server
