#include "server/http_connection.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <cctype>
#include <future>
#include <optional>
#include <thread>

#include "server/error.h"

namespace mkserve::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// A stream whose client reads nothing for this long is dropped.
constexpr std::chrono::seconds kWriteTimeout(30);
// How long an error answer waits for the client to stop sending before the socket closes.
constexpr std::chrono::seconds kLingerTimeout(2);
constexpr std::size_t kLingerReadBytes = 16 * 1024;
constexpr uint32_t kMaxHeadBytes = 64 * 1024;

std::string Lower(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

// The path and query of a request target: the origin form as sent ("/v1/models?x"), or the
// absolute form a proxy may send ("http://host:8000/v1/models"), which a server must take too.
std::string_view OriginForm(std::string_view target) {
  const size_t scheme_end = target.find("://");
  if (target.empty() || target.front() == '/' || scheme_end == std::string_view::npos) {
    return target;
  }
  const size_t path = target.find_first_of("/?", scheme_end + 3);
  return path == std::string_view::npos ? std::string_view("/") : target.substr(path);
}

// A request head refused before its body is read (the connection then closes: an unread body
// would otherwise be taken for the next request). A body this server can read comes by
// Content-Length or by the chunked coding alone (any other transfer coding: 501) and is not
// compressed (any content coding but identity: 415, rather than a gzip body read as bad JSON);
// an HTTP/1.1 request names exactly one Host (RFC 9112 asks a 400 otherwise).
std::optional<HttpResponse> HeadError(const http::request<http::string_body>& head) {
  auto refuse = [](int status, const std::string& message) {
    HttpResponse response = ErrorResponse(ApiError(ErrorKind::kInvalidRequest, message));
    response.status = status;
    return std::optional<HttpResponse>(std::move(response));
  };
  if (head.version() >= 11 && head.count(http::field::host) != 1) {
    return refuse(400, "an HTTP/1.1 request needs exactly one Host header");
  }
  for (const auto& field : head) {
    if (field.name() != http::field::content_encoding) continue;
    const std::string coding = Lower(field.value());
    if (coding.find_first_not_of(" \t") == std::string::npos || coding == "identity") continue;
    return refuse(415, "Content-Encoding '" + std::string(field.value()) +
                           "' is not supported: send the body uncompressed");
  }
  std::string codings;
  for (const auto& field : head) {
    if (field.name() != http::field::transfer_encoding) continue;
    if (!codings.empty()) codings += ',';
    codings += Lower(field.value());
  }
  if (codings.empty()) return std::nullopt;
  std::string compact;
  for (char c : codings) {
    if (c != ' ' && c != '\t') compact += c;
  }
  if (compact != "chunked") {
    return refuse(501, "Transfer-Encoding '" + codings +
                           "' is not supported: send the body with Content-Length or "
                           "'Transfer-Encoding: chunked' alone");
  }
  if (head.count(http::field::content_length) > 0 || head.version() < 11) {
    return refuse(400, head.version() < 11
                           ? "HTTP/1.0 has no chunked transfer coding"
                           : "a request with both Transfer-Encoding and Content-Length is "
                             "ambiguous; send one of them");
  }
  return std::nullopt;
}

HttpRequest ToHttpRequest(http::request<http::string_body>& message) {
  HttpRequest request;
  request.method = std::string(message.method_string());
  std::string_view target = OriginForm(message.target());
  const size_t question = target.find('?');
  request.path = std::string(target.substr(0, question));
  if (question != std::string_view::npos) request.query = std::string(target.substr(question + 1));
  for (const auto& field : message) {
    request.headers.emplace(Lower(field.name_string()), std::string(field.value()));
  }
  request.body = std::move(message.body());
  return request;
}

template <typename Message>
void SetHead(Message& message, const HttpResponse& response, bool keep_alive) {
  message.set(http::field::server, "mkserve");
  message.set(http::field::content_type, response.content_type);
  for (const auto& [name, value] : response.headers) message.set(name, value);
  message.keep_alive(keep_alive);
}

bool IsHangUp(beast::error_code error) {
  return error == http::error::end_of_stream || error == asio::error::eof ||
         error == asio::error::connection_reset || error == asio::error::operation_aborted ||
         error == beast::error::timeout || error == asio::error::bad_descriptor;
}

}  // namespace

void RunningRequests::Begin() {
  std::lock_guard lock(mutex_);
  ++count_;
}

void RunningRequests::End() {
  // Notified under the lock: a waiter may destroy this object as soon as it sees zero.
  std::lock_guard lock(mutex_);
  if (--count_ == 0) none_.notify_all();
}

bool RunningRequests::WaitFor(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return none_.wait_for(lock, timeout, [this] { return count_ == 0; });
}

void RunningRequests::Wait() {
  std::unique_lock lock(mutex_);
  none_.wait(lock, [this] { return count_ == 0; });
}

HttpConnection::HttpConnection(asio::ip::tcp::socket socket, ConnectionContext& context)
    : stream_(std::move(socket)), read_deadline_(stream_.get_executor()), context_(context) {
  ++context_.open_connections;
  beast::error_code ignored;
  // SSE events are small writes; Nagle would hold each back for the previous one's ACK.
  stream_.socket().set_option(asio::ip::tcp::no_delay(true), ignored);
}

HttpConnection::~HttpConnection() { --context_.open_connections; }

void HttpConnection::Start() { ReadHead(); }

void HttpConnection::Refuse(int max_connections) {
  AnswerAndClose(ErrorResponse(ApiError(
      ErrorKind::kUnavailable, "the server is at its limit of " + std::to_string(max_connections) +
                                   " open connections (--max-connections); retry shortly")));
}

void HttpConnection::CloseUnlessHandling() {
  if (phase_ != Phase::kHandling) Close();
}

void HttpConnection::Close() {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  EndReadDeadline();  // its handler holds the connection alive until it runs
  beast::error_code ignored;
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  stream_.close();
}

void HttpConnection::ReadHead() {
  if (context_.draining || phase_ == Phase::kClosed) return Close();
  phase_ = Phase::kReading;
  parser_.emplace();
  parser_->header_limit(kMaxHeadBytes);
  parser_->body_limit(static_cast<uint64_t>(context_.limits.max_body_bytes));
  ArmReadDeadline(context_.limits.header_timeout);
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code error, std::size_t) { self->OnHead(error); });
}

void HttpConnection::ArmReadDeadline(std::chrono::milliseconds timeout) {
  // The stream's own expiry stays as a backstop, later: a cancel that finds no read waiting
  // (data just arrived, the parser reads on) would otherwise leave the read without a deadline.
  stream_.expires_after(timeout + kLingerTimeout);
  read_timed_out_ = false;
  const uint64_t generation = ++read_generation_;
  read_deadline_.expires_after(timeout);
  read_deadline_.async_wait([self = shared_from_this(), generation](beast::error_code error) {
    // A handler already queued when its read ended is stale: its generation has passed.
    if (error || generation != self->read_generation_ || self->phase_ != Phase::kReading) return;
    self->read_timed_out_ = true;
    beast::error_code ignored;
    self->stream_.socket().cancel(ignored);
  });
}

void HttpConnection::EndReadDeadline() {
  ++read_generation_;
  read_deadline_.cancel();
}

void HttpConnection::OnHead(beast::error_code error) {
  if (error) return OnRead(error);
  if (std::optional<HttpResponse> refused = HeadError(parser_->get())) {
    EndReadDeadline();
    return AnswerAndClose(std::move(*refused));
  }
  auto expect = parser_->get()[http::field::expect];
  if (!beast::iequals(expect, "100-continue")) return ReadBody();
  EndReadDeadline();
  static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  stream_.expires_after(kWriteTimeout);
  asio::async_write(stream_, asio::buffer(kContinue),
                    [self = shared_from_this()](beast::error_code error, std::size_t) {
                      if (error) return self->Close();
                      self->ReadBody();
                    });
}

void HttpConnection::ReadBody() {
  ArmReadDeadline(context_.limits.body_timeout);
  http::async_read(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code error, std::size_t) { self->OnRead(error); });
}

void HttpConnection::OnRead(beast::error_code error) {
  EndReadDeadline();
  if (!error) return Dispatch();
  if (read_timed_out_ && phase_ != Phase::kClosed) {
    // An idle keep-alive connection just closes; a request that began gets an answer.
    const bool in_body = parser_->is_header_done();
    if (!in_body && buffer_.size() == 0 && !parser_->got_some()) return Close();
    const auto limit = in_body ? context_.limits.body_timeout : context_.limits.header_timeout;
    return AnswerAndClose(ErrorResponse(ApiError(
        ErrorKind::kRequestTimeout, std::string("the request ") + (in_body ? "body" : "head") +
                                        " did not arrive within " + std::to_string(limit.count()) +
                                        " ms (" +
                                        (in_body ? "--body-timeout" : "--header-timeout") + ")")));
  }
  if (IsHangUp(error) || phase_ == Phase::kClosed) return Close();
  if (error == http::error::body_limit) {
    return AnswerAndClose(ErrorResponse(
        ApiError(ErrorKind::kPayloadTooLarge,
                 "request body too large; the server limit is set by --max-body-bytes")));
  }
  if (error == http::error::header_limit) {
    HttpResponse too_large = ErrorResponse(
        ApiError(ErrorKind::kInvalidRequest, "request head over " + std::to_string(kMaxHeadBytes) +
                                                 " bytes; send fewer or shorter headers"));
    too_large.status = 431;  // the kind's 400, made specific
    return AnswerAndClose(std::move(too_large));
  }
  AnswerAndClose(ErrorResponse(
      ApiError(ErrorKind::kInvalidRequest, "malformed HTTP request: " + error.message())));
}

void HttpConnection::Dispatch() {
  if (context_.draining) return Close();
  phase_ = Phase::kHandling;
  stream_.expires_never();
  http::request<http::string_body> message = parser_->release();
  version_ = message.version();
  keep_alive_ = message.keep_alive();
  head_only_ = message.method() == http::verb::head;
  HttpRequest request = ToHttpRequest(message);
  request.is_connection_closed =
      WatchSocket(stream_.socket().native_handle(), context_.stop_requested);
  context_.running.Begin();
  try {
    std::thread(&HttpConnection::Handle, shared_from_this(), std::move(request)).detach();
  } catch (const std::system_error&) {
    context_.running.End();
    AnswerAndClose(ErrorResponse(ApiError(
        ErrorKind::kUnavailable, "the server cannot start a thread for this request; retry")));
  }
}

void HttpConnection::AnswerAndClose(HttpResponse response) {
  if (context_.on_response) context_.on_response(response.status);
  auto message = std::make_shared<http::response<http::string_body>>();
  message->result(static_cast<unsigned>(response.status));
  message->version(11);
  message->set(http::field::server, "mkserve");
  message->set(http::field::content_type, response.content_type);
  message->set(http::field::access_control_allow_origin, "*");
  message->keep_alive(false);
  message->body() = std::move(response.body);
  message->prepare_payload();
  stream_.expires_after(kWriteTimeout);
  http::async_write(stream_, *message,
                    [self = shared_from_this(), message](beast::error_code error, std::size_t) {
                      if (error) return self->Close();
                      self->LingerAndClose();
                    });
}

void HttpConnection::LingerAndClose() {
  beast::error_code ignored;
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  stream_.expires_after(kLingerTimeout);
  DropInputUntilClosed();
}

void HttpConnection::DropInputUntilClosed() {
  buffer_.clear();
  stream_.async_read_some(buffer_.prepare(kLingerReadBytes),
                          [self = shared_from_this()](beast::error_code error, std::size_t) {
                            if (error) return self->Close();  // the client closed, or time
                            self->DropInputUntilClosed();
                          });
}

void HttpConnection::Handle(std::shared_ptr<HttpConnection> self, HttpRequest request) {
  ConnectionContext& context = self->context_;
  bool keep_alive = false;
  bool written = false;
  {
    HttpResponse response = context.router->Respond(request);
    if (context.on_response) context.on_response(response.status);
    // HTTP/1.0 has no chunked encoding: a stream ends by closing the connection.
    keep_alive = self->keep_alive_ && !context.draining && (self->version_ >= 11 || !response.next);
    written = response.next ? self->WriteStream(response, keep_alive)
                            : self->WriteWhole(response, keep_alive);
  }  // the response and its generator go first: that cancels an unfinished run
  request = HttpRequest();
  asio::post(self->stream_.get_executor(), [self, keep_alive, written] {
    if (written && keep_alive) {
      self->ReadHead();
    } else {
      self->Close();
    }
  });
  self.reset();
  context.running.End();  // last: the server may be destroyed once none runs
}

template <typename AsyncWrite>
bool HttpConnection::WriteOnIoThread(AsyncWrite start_write) {
  std::promise<beast::error_code> finished;
  auto result = finished.get_future();
  asio::post(stream_.get_executor(), [this, &start_write, &finished] {
    stream_.expires_after(kWriteTimeout);
    start_write([&finished](beast::error_code error, std::size_t) { finished.set_value(error); });
  });
  return !result.get();
}

bool HttpConnection::WriteWhole(const HttpResponse& response, bool keep_alive) {
  http::response<http::string_body> message;
  message.result(static_cast<unsigned>(response.status));
  message.version(version_);
  SetHead(message, response, keep_alive);
  message.body() = response.body;
  message.prepare_payload();
  if (head_only_) {  // Content-Length of the body a GET would get, and no body
    http::response_serializer<http::string_body> serializer(message);
    return WriteOnIoThread([&](auto done) { http::async_write_header(stream_, serializer, done); });
  }
  return WriteOnIoThread([&](auto done) { http::async_write(stream_, message, done); });
}

bool HttpConnection::WriteStream(HttpResponse& response, bool keep_alive) {
  const bool chunked = version_ >= 11;
  http::response<http::empty_body> head;
  head.result(static_cast<unsigned>(response.status));
  head.version(version_);
  SetHead(head, response, keep_alive);
  head.chunked(chunked);
  http::response_serializer<http::empty_body> serializer(head);
  if (!WriteOnIoThread([&](auto done) { http::async_write_header(stream_, serializer, done); })) {
    return false;
  }
  if (head_only_) return true;  // a HEAD answer has no body, not even the last chunk
  std::string chunk;
  for (bool more = true; more;) {
    chunk.clear();
    more = response.next(chunk);
    if (chunk.empty()) continue;
    bool sent = WriteOnIoThread([&](auto done) {
      if (chunked) {
        asio::async_write(stream_, http::make_chunk(asio::buffer(chunk)), done);
      } else {
        asio::async_write(stream_, asio::buffer(chunk), done);
      }
    });
    if (!sent) return false;
  }
  if (!chunked) return true;
  return WriteOnIoThread(
      [&](auto done) { asio::async_write(stream_, http::make_chunk_last(), done); });
}

}  // namespace mkserve::server
