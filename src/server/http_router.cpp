#include "server/http_router.h"

#include <cctype>
#include <string_view>

#include "common/error.h"
#include "server/error.h"

namespace mkserve::server {
namespace {

// Browsers send a preflight before cross-origin POSTs; we allow any origin (the API key, not
// the origin, is the access control) and echo the origin so credentialed requests work too.
void AddCorsHeaders(const HttpRequest& request, HttpResponse& response) {
  std::string origin = request.Header("origin");
  response.headers["Access-Control-Allow-Origin"] = origin.empty() ? "*" : origin;
  if (!origin.empty()) response.headers["Vary"] = "Origin";
}

HttpResponse Preflight(const HttpRequest& request) {
  HttpResponse response = TextResponse("", "text/plain", 204);
  response.headers["Access-Control-Allow-Methods"] = "GET, HEAD, POST, DELETE, OPTIONS";
  std::string asked = request.Header("access-control-request-headers");
  response.headers["Access-Control-Allow-Headers"] =
      asked.empty() ? "Authorization, Content-Type" : asked;
  response.headers["Access-Control-Max-Age"] = "86400";
  return response;
}

bool IsOpenAiPath(const std::string& path) { return path.rfind("/v1/", 0) == 0; }

// Compares a sent key with the server's in time that does not depend on where they differ (the
// length is no secret).
bool SameKey(std::string_view sent, std::string_view key) {
  if (key.empty() || sent.size() != key.size()) return false;
  unsigned char differ = 0;
  for (size_t i = 0; i < key.size(); ++i) differ |= static_cast<unsigned char>(sent[i] ^ key[i]);
  return differ == 0;
}

// The token of an `Authorization: Bearer <token>` header (the scheme's case and the spaces
// around the token do not matter, RFC 9110); empty for another scheme.
std::string_view BearerToken(std::string_view header) {
  const size_t space = header.find(' ');
  if (space != 6) return {};
  for (size_t i = 0; i < 6; ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != "bearer"[i]) return {};
  }
  std::string_view token = header.substr(space);
  while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) token.remove_prefix(1);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
  return token;
}

// A route's path matches itself, or, ending in "/*", any longer path under it.
bool Matches(const std::string& route_path, const std::string& path) {
  if (route_path == path) return true;
  if (route_path.size() < 2 || route_path.compare(route_path.size() - 2, 2, "/*") != 0) {
    return false;
  }
  const size_t prefix = route_path.size() - 1;  // keeps the slash
  return path.size() > prefix && path.compare(0, prefix, route_path, 0, prefix) == 0;
}

}  // namespace

void HttpRouter::Add(const std::string& method, const std::string& path, Access access,
                     Handler handler) {
  if (IsOpenAiPath(path) && access != Access::kAuthenticated) {
    throw Error("route " + path +
                ": every /v1/ route needs the API key (OpenAI clients expect 401)");
  }
  routes_[{method, path}] = Route{access, std::move(handler)};
}

bool HttpRouter::IsAuthorized(const HttpRequest& request) const {
  if (api_key_.empty()) return true;
  const std::string authorization = request.Header("authorization");
  return SameKey(BearerToken(authorization), api_key_) ||
         SameKey(request.Header("x-api-key"), api_key_);
}

const HttpRouter::Route* HttpRouter::Find(const std::string& method,
                                          const std::string& path) const {
  auto exact = routes_.find({method, path});
  if (exact != routes_.end()) return &exact->second;
  for (const auto& [key, route] : routes_) {
    if (key.first == method && Matches(key.second, path)) return &route;
  }
  return nullptr;
}

bool HttpRouter::AnyRouteNeedsKey(const std::string& path) const {
  for (const auto& [key, route] : routes_) {
    if (Matches(key.second, path) && route.access == Access::kAuthenticated) return true;
  }
  return false;
}

std::string HttpRouter::MethodsOf(const std::string& path) const {
  std::string methods;
  for (const auto& [key, route] : routes_) {
    if (!Matches(key.second, path)) continue;
    methods += (methods.empty() ? "" : ", ") + key.first;
    if (key.first == "GET") methods += ", HEAD";
  }
  return methods;
}

HttpResponse HttpRouter::Respond(const HttpRequest& request) const {
  // HEAD is answered as GET (the connection sends the head only).
  const Route* route = Find(request.method == "HEAD" ? "GET" : request.method, request.path);
  // An unknown /v1/ path needs the key too, as at OpenAI, and so does another method on a path
  // that needs it (GET /tokenize): no probing for routes without it.
  bool needs_key = route == nullptr ? IsOpenAiPath(request.path) || AnyRouteNeedsKey(request.path)
                                    : route->access == Access::kAuthenticated;
  HttpResponse response;
  if (request.method == "OPTIONS") {
    response = Preflight(request);
  } else if (needs_key && !IsAuthorized(request)) {
    response =
        ErrorResponse(ApiError(ErrorKind::kUnauthorized,
                               "missing or invalid API key: send 'Authorization: Bearer <key>'"));
  } else if (route == nullptr) {
    const std::string allowed = MethodsOf(request.path);
    if (allowed.empty()) {
      response = ErrorResponse(
          ApiError(ErrorKind::kNotFound, "no route for " + request.method + " " + request.path));
    } else {
      response =
          ErrorResponse(ApiError(ErrorKind::kMethodNotAllowed,
                                 request.path + " takes " + allowed + ", not " + request.method));
      response.headers["Allow"] = allowed;
    }
  } else {
    response = route->handler(request);
  }
  AddCorsHeaders(request, response);
  return response;
}

}  // namespace mkserve::server
