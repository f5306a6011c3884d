#include "server/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <mutex>

#include "common/error.h"
#include "server/connection_watch.h"
#include "server/error.h"

namespace mkserve::server {
namespace {

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// Browsers send a preflight before cross-origin POSTs; we allow any origin (the API key, not
// the origin, is the access control) and echo the origin so credentialed requests work too.
void AddCorsHeaders(const httplib::Request& req, httplib::Response& res) {
  std::string origin = req.get_header_value("Origin");
  res.set_header("Access-Control-Allow-Origin", origin.empty() ? "*" : origin);
  if (!origin.empty()) res.set_header("Vary", "Origin");
}

void AnswerPreflight(const httplib::Request& req, httplib::Response& res) {
  AddCorsHeaders(req, res);
  res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
  std::string asked = req.get_header_value("Access-Control-Request-Headers");
  res.set_header("Access-Control-Allow-Headers",
                 asked.empty() ? "Authorization, Content-Type" : asked);
  res.set_header("Access-Control-Max-Age", "86400");
  res.status = 204;
}

void SetError(httplib::Response& res, const ApiError& error) {
  res.status = StatusOf(error.kind()).http_status;
  res.set_content(ErrorBody(error), "application/json");
}

// The connection's socket is looked up on the first check only: most requests never ask.
std::function<bool()> MakeClosedCheck(const httplib::Request& req) {
  struct State {
    std::once_flag found;
    int fd = -1;
    ConnectionAddress address;
  };
  auto state = std::make_shared<State>();
  state->address = {req.local_addr, req.local_port, req.remote_addr, req.remote_port};
  return [state] {
    std::call_once(state->found, [&] { state->fd = FindConnectionSocket(state->address); });
    return IsPeerClosed(state->fd);
  };
}

HttpRequest ToHttpRequest(const httplib::Request& req) {
  HttpRequest request;
  request.method = req.method;
  request.path = req.path;
  for (const auto& [name, value] : req.headers) request.headers[Lower(name)] = value;
  request.body = req.body;
  request.is_connection_closed = MakeClosedCheck(req);
  return request;
}

bool IsAuthorized(const httplib::Request& req, const std::string& api_key) {
  if (api_key.empty()) return true;
  return req.get_header_value("Authorization") == "Bearer " + api_key ||
         req.get_header_value("X-Api-Key") == api_key;
}

void ApplyResponse(HttpResponse response, httplib::Response& res) {
  res.status = response.status;
  for (const auto& [name, value] : response.headers) res.set_header(name, value);
  if (!response.next) {
    res.set_content(response.body, response.content_type);
    return;
  }
  ChunkGenerator next = std::move(response.next);
  res.set_chunked_content_provider(response.content_type,
                                   [next](size_t, httplib::DataSink& sink) mutable {
                                     std::string chunk;
                                     bool more = next(chunk);
                                     if (!chunk.empty() && !sink.write(chunk.data(), chunk.size()))
                                       return false;
                                     if (!more) sink.done();
                                     return true;
                                   });
}

}  // namespace

class HttpServer::Impl {
 public:
  explicit Impl(HttpOptions options) : options_(std::move(options)) {
    server_.set_payload_max_length(static_cast<size_t>(options_.max_body_bytes));
    int num_threads = std::max(4, options_.num_threads);
    server_.new_task_queue = [num_threads] { return new httplib::ThreadPool(num_threads); };
    server_.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
      if (req.method != "OPTIONS") return httplib::Server::HandlerResponse::Unhandled;
      AnswerPreflight(req, res);
      return httplib::Server::HandlerResponse::Handled;
    });
    server_.set_error_handler(httplib::Server::HandlerWithResponse(
        [](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty() || res.is_chunked_content_provider_) {
            return httplib::Server::HandlerResponse::Unhandled;
          }
          AddCorsHeaders(req, res);
          SetError(res, ErrorForStatus(req, res.status));
          return httplib::Server::HandlerResponse::Handled;
        }));
    server_.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
          SetError(res, ApiError(ErrorKind::kInternal, "internal error in the HTTP layer"));
        });
  }

  void Route(const std::string& method, const std::string& path, Access access, Handler handler) {
    auto wrapped = [this, access, handler](const httplib::Request& req, httplib::Response& res) {
      AddCorsHeaders(req, res);
      if (access == Access::kAuthenticated && !IsAuthorized(req, options_.api_key)) {
        SetError(res, ApiError(ErrorKind::kUnauthorized,
                               "missing or invalid API key: send 'Authorization: Bearer <key>'"));
        return;
      }
      ApplyResponse(handler(ToHttpRequest(req)), res);
    };
    if (method == "GET") {
      server_.Get(path, wrapped);
    } else {
      server_.Post(path, wrapped);
    }
  }

  int Bind() {
    int port = options_.port;
    if (port == 0) {
      port = server_.bind_to_any_port(options_.host);
    } else if (!server_.bind_to_port(options_.host, port)) {
      port = -1;
    }
    if (port < 0) {
      throw Error("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                  " (address in use or not available); pick another --host/--port");
    }
    return port;
  }

  void Listen() { server_.listen_after_bind(); }
  void Stop() { server_.stop(); }

 private:
  static ApiError ErrorForStatus(const httplib::Request& req, int status) {
    if (status == 413) {
      return ApiError(ErrorKind::kPayloadTooLarge,
                      "request body too large; the server limit is set by --max-body-bytes");
    }
    if (status == 404) {
      return ApiError(ErrorKind::kNotFound, "no route for " + req.method + " " + req.path);
    }
    return ApiError(ErrorKind::kInvalidRequest,
                    "malformed HTTP request (status " + std::to_string(status) + ")");
  }

  HttpOptions options_;
  httplib::Server server_;
};

HttpServer::HttpServer(HttpOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
HttpServer::~HttpServer() = default;

void HttpServer::Route(const std::string& method, const std::string& path, Access access,
                       Handler handler) {
  impl_->Route(method, path, access, std::move(handler));
}
int HttpServer::Bind() { return impl_->Bind(); }
void HttpServer::Listen() { impl_->Listen(); }
void HttpServer::Stop() { impl_->Stop(); }

}  // namespace mkserve::server
