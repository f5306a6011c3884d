// The route table of the HTTP layer: turns one complete request into its response. It answers
// CORS preflights (no auth), checks the API key of authenticated routes (401), answers unknown
// routes with 404, and adds the CORS headers to every response. It knows nothing of sockets.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "server/http_types.h"

namespace mkserve::server {

enum class Access { kPublic, kAuthenticated };

class HttpRouter {
 public:
  explicit HttpRouter(std::string api_key) : api_key_(std::move(api_key)) {}

  // `handler` must not throw (see routes.cpp). Every /v1/ path needs the key (OpenAI clients
  // expect 401 there): a /v1/ route declared public is an error (mkserve::Error). A path ending
  // in "/*" matches every longer path under it (an id in the path: /v1/models/*); an exact
  // route wins over it.
  void Add(const std::string& method, const std::string& path, Access access, Handler handler);

  HttpResponse Respond(const HttpRequest& request) const;

 private:
  struct Route {
    Access access;
    Handler handler;
  };
  bool IsAuthorized(const HttpRequest& request) const;
  const Route* Find(const std::string& method, const std::string& path) const;
  // The methods routed for `path`, "GET, HEAD, POST" style; empty when the path has no route.
  std::string MethodsOf(const std::string& path) const;
  // Whether a route of another method on `path` needs the API key.
  bool AnyRouteNeedsKey(const std::string& path) const;

  std::string api_key_;                                          // empty: no auth
  std::map<std::pair<std::string, std::string>, Route> routes_;  // by (method, path)
};

}  // namespace mkserve::server
