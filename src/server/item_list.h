// OpenAI's cursor-paged list of items, as GET /v1/responses/{id}/input_items and GET
// /v1/conversations/{id}/items answer: `limit` 1-100 (default 20), `order` desc (default, the
// newest first) or asc, `after` the id of the item before the page.
#pragma once

#include <string>

#include "server/json.h"

namespace mkserve::server {

// The page of `items` (oldest first, each with an "id") that the URL query `query` asks for:
// {"object": "list", "data", "first_id", "last_id", "has_more"}. Throws ApiError naming the bad
// parameter.
Json ItemListPage(const Json& items, const std::string& query);

}  // namespace mkserve::server
