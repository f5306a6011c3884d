#include "server/url_query.h"

#include <algorithm>
#include <charconv>
#include <iterator>

namespace mkserve::server {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string PercentDecoded(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && HexDigit(text[i + 1]) >= 0 &&
        HexDigit(text[i + 2]) >= 0) {
      out += static_cast<char>(HexDigit(text[i + 1]) * 16 + HexDigit(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::multimap<std::string, std::string> ParseQuery(const std::string& query) {
  std::multimap<std::string, std::string> params;
  size_t begin = 0;
  while (begin <= query.size()) {
    size_t end = query.find('&', begin);
    if (end == std::string::npos) end = query.size();
    std::string pair = query.substr(begin, end - begin);
    std::replace(pair.begin(), pair.end(), '+', ' ');
    if (!pair.empty()) {
      const size_t eq = pair.find('=');
      params.emplace(PercentDecoded(pair.substr(0, eq)),
                     eq == std::string::npos ? "" : PercentDecoded(pair.substr(eq + 1)));
    }
    begin = end + 1;
  }
  return params;
}

std::optional<std::string> QueryValue(const std::multimap<std::string, std::string>& query,
                                      const std::string& name) {
  const auto [begin, end] = query.equal_range(name);  // a name's values keep the order sent
  return begin == end ? std::optional<std::string>() : std::prev(end)->second;
}

std::optional<int64_t> QueryInteger(const std::string& text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace mkserve::server
