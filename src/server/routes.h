// The route table: every endpoint of the server, registered on an HttpServer.
#pragma once

#include "server/http_server.h"
#include "server/server_metrics.h"
#include "server/server_state.h"

namespace mkserve::server {

// `state` and `counters` must outlive `http`; /metrics reports `counters`, which the server's
// HttpOptions::on_response feeds.
void RegisterRoutes(HttpServer& http, const ServerState& state, const HttpCounters& counters);

}  // namespace mkserve::server
