#include "server/item_list.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <vector>

#include "server/json_fields.h"
#include "server/url_query.h"

namespace mkserve::server {

Json ItemListPage(const Json& items, const std::string& query) {
  const std::multimap<std::string, std::string> parsed = ParseQuery(query);
  int64_t limit = 20;
  if (std::optional<std::string> text = QueryValue(parsed, "limit")) {
    const std::optional<int64_t> value = QueryInteger(*text);
    if (!value) ThrowInvalid("limit", "must be an integer from 1 to 100, got '" + *text + "'");
    limit = *value;
    if (limit < 1 || limit > 100) ThrowInvalid("limit", "must be from 1 to 100");
  }
  // include asks for parts an item leaves out; stored items keep everything they had (an output
  // message its logprobs, reasoning its text), so only names of hosted tools' outputs are refused.
  for (const auto& [name, value] : parsed) {
    if ((name == "include" || name == "include[]") && value != "message.output_text.logprobs" &&
        value != "reasoning.encrypted_content") {
      ThrowInvalid("include",
                   "only \"message.output_text.logprobs\" and "
                   "\"reasoning.encrypted_content\" can be included, got '" +
                       value + "'");
    }
  }
  const std::string order = QueryValue(parsed, "order").value_or("desc");
  if (order != "asc" && order != "desc") ThrowInvalid("order", "must be 'asc' or 'desc'");
  std::vector<Json> ordered(items.begin(), items.end());
  if (order == "desc") std::reverse(ordered.begin(), ordered.end());
  size_t begin = 0;
  if (std::optional<std::string> after = QueryValue(parsed, "after")) {
    auto it = std::find_if(ordered.begin(), ordered.end(),
                           [&](const Json& item) { return item.value("id", "") == *after; });
    if (it == ordered.end()) ThrowInvalid("after", "no item '" + *after + "' in this list");
    begin = static_cast<size_t>(it - ordered.begin()) + 1;
  }
  const size_t end = std::min(ordered.size(), begin + static_cast<size_t>(limit));
  Json data = Json::array();
  for (size_t i = begin; i < end; ++i) data.push_back(ordered[i]);
  return {{"object", "list"},
          {"data", data},
          {"first_id", data.empty() ? Json(nullptr) : data.front()["id"]},
          {"last_id", data.empty() ? Json(nullptr) : data.back()["id"]},
          {"has_more", end < ordered.size()}};
}

}  // namespace mkserve::server
