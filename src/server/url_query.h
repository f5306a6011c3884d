// The parts of a request target after the path: %XX escapes and the query's name=value pairs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace mkserve::server {

// %XX escapes decoded (the openai SDKs escape an id's slash as %2F); anything else kept as is.
std::string PercentDecoded(const std::string& text);

// "a=1&b=x%20y" as {a: "1", b: "x y"} ('+' is a space, as forms send it); a name without '='
// has an empty value, and a repeated name keeps every value, in the order sent.
std::multimap<std::string, std::string> ParseQuery(const std::string& query);

// The value of `name` in a parsed query, the last one sent when it repeats; nullopt when absent.
std::optional<std::string> QueryValue(const std::multimap<std::string, std::string>& query,
                                      const std::string& name);

// A query value that is a whole decimal integer ("-3" included, "5x" and "" not); else nullopt.
std::optional<int64_t> QueryInteger(const std::string& text);

}  // namespace mkserve::server
