// BaseUrl: the OpenAI base URL a user gives a client (`http://host:8000/v1`), split into the part
// that opens the connection and the path the API routes hang from.
#pragma once

#include <string>
#include <string_view>

namespace mkserve::server {

struct BaseUrl {
  std::string origin;    // "http://host:port"
  std::string api_path;  // "/v1", or "/prefix/v1" behind a proxy
};

// Accepts http://HOST[:PORT][/PREFIX][/v1][/]: with or without the trailing slash and the /v1.
// Throws mkserve::Error saying what is wrong (https, no host, a query string, ...).
BaseUrl ParseBaseUrl(std::string_view url);

}  // namespace mkserve::server
