#include "server/base_url.h"

#include "common/error.h"

namespace mkserve::server {

BaseUrl ParseBaseUrl(std::string_view url) {
  const std::string given(url);
  auto fail = [&](const std::string& why) {
    return Error("--url '" + given + "' " + why +
                 "; write it as http://HOST:PORT/v1 (the base URL an OpenAI client takes)");
  };
  constexpr std::string_view kScheme = "http://";
  if (url.rfind("https://", 0) == 0) throw fail("uses https, which bench-serve does not speak");
  if (url.rfind(kScheme, 0) != 0) throw fail("does not start with http://");
  std::string_view rest = url.substr(kScheme.size());
  if (rest.find_first_of("?#") != std::string_view::npos) {
    throw fail("has a query or fragment");
  }
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash);
  if (authority.empty() || authority.front() == ':') throw fail("has no host");
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  constexpr std::string_view kApi = "/v1";
  if (path.size() >= kApi.size() && path.substr(path.size() - kApi.size()) == kApi) {
    path.remove_suffix(kApi.size());
  }
  return BaseUrl{std::string(kScheme) + std::string(authority), std::string(path) + "/v1"};
}

}  // namespace mkserve::server
