// The JSON type of the server. Ordered, so that objects keep the client's key order (as Python
// dicts do): chat templates print tool schemas with tojson, and the order is visible there.
#pragma once

#include <nlohmann/json.hpp>

namespace mkserve::server {

using Json = nlohmann::ordered_json;

}  // namespace mkserve::server
