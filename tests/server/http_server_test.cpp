#include "server/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "common/error.h"

namespace mkserve::server {
namespace {

using namespace std::chrono_literals;

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpOptions options;
    options.port = 0;
    options.api_key = "sekret";
    options.max_body_bytes = 1024;
    options.header_timeout = header_timeout_;
    options.body_timeout = body_timeout_;
    options.on_response = [this](int status) {
      std::lock_guard lock(statuses_mutex_);
      statuses_.push_back(status);
    };
    server_ = std::make_unique<HttpServer>(options);
    server_->Route("GET", "/public", Access::kPublic,
                   [](const HttpRequest&) { return JsonResponse("{\"ok\":true}"); });
    server_->Route("POST", "/echo", Access::kAuthenticated, [](const HttpRequest& request) {
      return TextResponse(request.body, "text/plain");
    });
    server_->Route("POST", "/stream", Access::kPublic, [](const HttpRequest&) {
      auto count = std::make_shared<int>(0);
      HttpResponse response = TextResponse("", "text/event-stream");
      response.next = [count](std::string& chunk) {
        chunk = "data: " + std::to_string((*count)++) + "\n\n";
        return *count < 3;
      };
      return response;
    });
    server_->Route("GET", "/events", Access::kPublic, [](const HttpRequest&) {
      HttpResponse response = TextResponse("", "text/event-stream");
      response.next = [](std::string& chunk) {
        chunk = "data: event\n\n";
        return false;
      };
      return response;
    });
    server_->Route("GET", "/v1/open", Access::kAuthenticated,
                   [](const HttpRequest&) { return JsonResponse("{}"); });
    // A path with an id in it, and one exact path under the same prefix.
    server_->Route("GET", "/items/*", Access::kPublic, [](const HttpRequest& request) {
      return TextResponse("item " + request.path, "text/plain");
    });
    server_->Route("GET", "/items/special", Access::kPublic,
                   [](const HttpRequest&) { return TextResponse("special", "text/plain"); });
    // Streams until the server asks it to stop, then ends with a last event.
    server_->Route("POST", "/until-stop", Access::kPublic, [](const HttpRequest& request) {
      HttpResponse response = TextResponse("", "text/event-stream");
      response.next = [watch = request.is_connection_closed](std::string& chunk) {
        std::this_thread::sleep_for(10ms);
        if (!watch.stop_requested()) {
          chunk = "data: tick\n\n";
          return true;
        }
        chunk = "data: stopped\n\n";
        return false;
      };
      return response;
    });
    server_->Route("POST", "/wait", Access::kPublic, [this](const HttpRequest& request) {
      auto deadline = std::chrono::steady_clock::now() + 5s;
      while (!request.is_connection_closed() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
      }
      saw_close_ = request.is_connection_closed();
      wait_done_ = true;
      return JsonResponse("{}");
    });
    port_ = server_->Bind();
    thread_ = std::thread([this] { server_->Listen(); });
  }

  void TearDown() override {
    server_->Stop();
    thread_.join();
  }

  int Connect() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port_);
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      close(fd);
      return -1;
    }
    timeval timeout{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    return fd;
  }

  static void Send(int fd, const std::string& text) {
    ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }

  // Reads until `marker` has arrived, the peer closes, or 5 s without data.
  static std::string ReadUntil(int fd, const std::string& marker) {
    std::string text;
    char buffer[4096];
    while (text.find(marker) == std::string::npos) {
      ssize_t n = read(fd, buffer, sizeof(buffer));
      if (n <= 0) break;
      text.append(buffer, static_cast<size_t>(n));
    }
    return text;
  }

  // One connection: sends `request` (raw bytes), reads until `marker`, closes.
  std::string Exchange(const std::string& request, const std::string& marker) {
    const int fd = Connect();
    if (fd < 0) {
      ADD_FAILURE() << "cannot connect";
      return "";
    }
    Send(fd, request);
    std::string answer = ReadUntil(fd, marker);
    close(fd);
    return answer;
  }

  httplib::Client Client() { return httplib::Client("127.0.0.1", port_); }

  std::chrono::milliseconds header_timeout_ = 10s, body_timeout_ = 60s;  // the defaults
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<bool> saw_close_{false};
  std::atomic<bool> wait_done_{false};
  std::mutex statuses_mutex_;
  std::vector<int> statuses_;  // HttpOptions::on_response, in order
};

TEST_F(HttpServerTest, PublicRouteNeedsNoKey) {
  auto result = Client().Get("/public");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->get_header_value("Access-Control-Allow-Origin"), "*");
}

TEST_F(HttpServerTest, AuthenticatedRouteChecksBearerKey) {
  httplib::Client client = Client();
  auto missing = client.Post("/echo", "hello", "text/plain");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 401);
  EXPECT_EQ(nlohmann::json::parse(missing->body)["error"]["type"], "authentication_error");
  auto wrong = client.Post("/echo", {{"Authorization", "Bearer nope"}}, "hello", "text/plain");
  EXPECT_EQ(wrong->status, 401);
  auto right = client.Post("/echo", {{"Authorization", "Bearer sekret"}}, "hello", "text/plain");
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200);
  EXPECT_EQ(right->body, "hello");
  // The scheme's case and the spaces around the token do not matter (RFC 9110); the key does.
  for (const char* header : {"bearer sekret", "BEARER   sekret ", "Bearer\tsekret"}) {
    auto result = client.Post("/echo", {{"Authorization", header}}, "hello", "text/plain");
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, header[6] == '\t' ? 401 : 200) << header;
  }
  for (const char* header : {"Basic sekret", "Bearer sekret2", "Bearer sekre", "Bearersekret"}) {
    EXPECT_EQ(client.Post("/echo", {{"Authorization", header}}, "x", "text/plain")->status, 401)
        << header;
  }
}

// Bodies come by Content-Length or by the chunked coding alone. Anything else is refused before
// the body is read, and the connection closed: bytes left unread would be read as a request.
TEST_F(HttpServerTest, OtherTransferCodingsAreRefusedAndTheConnectionClosed) {
  const std::string smuggled = "GET /public HTTP/1.1\r\nHost: x\r\n\r\n";
  for (const std::string coding : {"identity", "gzip, chunked", "chunked, gzip"}) {
    const std::string answer = Exchange(
        "POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sekret\r\n"
        "Transfer-Encoding: " +
            coding + "\r\n\r\n" + smuggled,
        "\r\n\r\n{\"ok\":true}");
    EXPECT_EQ(answer.rfind("HTTP/1.1 501", 0), 0u) << coding << ": " << answer;
    EXPECT_NE(answer.find("is not supported"), std::string::npos) << answer;
    EXPECT_EQ(answer.find("{\"ok\":true}"), std::string::npos)
        << coding << ": smuggled request ran";
  }
  const std::string both = Exchange(
      "POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sekret\r\n"
      "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
      "\r\n\r\n");
  EXPECT_EQ(both.rfind("HTTP/1.1 400", 0), 0u) << both;
  const std::string chunked = Exchange(
      "POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sekret\r\n"
      "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
      "hello");
  EXPECT_EQ(chunked.rfind("HTTP/1.1 200", 0), 0u) << chunked;
}

// A compressed body is refused by name (415) rather than read as text; "identity" is no coding.
// An HTTP/1.1 request without a Host, or with two, is a 400 (RFC 9112); HTTP/1.0 needs none.
TEST_F(HttpServerTest, CompressedBodiesAndHostlessRequestsAreRefusedByName) {
  const std::string body = "{\"ok\":true}";
  auto post = [&](const std::string& headers) {
    return Exchange("POST /echo HTTP/1.1\r\nAuthorization: Bearer sekret\r\n" + headers +
                        "Content-Length: " + std::to_string(body.size()) +
                        "\r\nConnection: close\r\n\r\n" + body,
                    "\r\n\r\n{");
  };
  for (const char* coding : {"gzip", "br", "Deflate", "gzip, identity"}) {
    const std::string answer = post("Host: x\r\nContent-Encoding: " + std::string(coding) + "\r\n");
    EXPECT_EQ(answer.rfind("HTTP/1.1 415", 0), 0u) << coding << ": " << answer;
    EXPECT_NE(answer.find("send the body uncompressed"), std::string::npos) << answer;
  }
  EXPECT_EQ(post("Host: x\r\nContent-Encoding: identity\r\n").rfind("HTTP/1.1 200", 0), 0u);
  for (const char* hosts : {"", "Host: x\r\nHost: y\r\n"}) {
    const std::string answer = post(hosts);
    EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << hosts << ": " << answer;
    EXPECT_NE(answer.find("Host header"), std::string::npos) << answer;
  }
  const std::string old = Exchange("GET /public HTTP/1.0\r\n\r\n", "{\"ok\":true}");
  EXPECT_EQ(old.rfind("HTTP/1.0 200", 0), 0u) << old;
}

// A proxy may send the absolute form of a target; a server must take it (RFC 9112).
TEST_F(HttpServerTest, AnAbsoluteFormTargetIsServedAsItsPath) {
  const std::string answer =
      Exchange("GET http://127.0.0.1:8000/public HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
               "{\"ok\":true}");
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  EXPECT_NE(answer.find("{\"ok\":true}"), std::string::npos) << answer;
}

TEST_F(HttpServerTest, EveryV1RouteNeedsTheKey) {
  EXPECT_THROW(server_->Route("GET", "/v1/public", Access::kPublic,
                              [](const HttpRequest&) { return JsonResponse("{}"); }),
               Error);
  httplib::Client client = Client();
  EXPECT_EQ(client.Get("/v1/open")->status, 401);
  EXPECT_EQ(client.Get("/v1/open", {{"Authorization", "Bearer sekret"}})->status, 200);
  // Unknown /v1/ routes too: without the key nobody learns which exist. Nor which methods a
  // keyed path takes (/echo is a keyed POST).
  EXPECT_EQ(client.Get("/v1/nothing")->status, 401);
  EXPECT_EQ(client.Get("/echo")->status, 401);
  EXPECT_EQ(client.Get("/echo", {{"Authorization", "Bearer sekret"}})->status, 405);
  EXPECT_EQ(client.Get("/public")->status, 200);
}

TEST_F(HttpServerTest, UnknownRouteIsOpenAiShaped404) {
  auto result = Client().Get("/v1/nothing", {{"Authorization", "Bearer sekret"}});
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 404);
  nlohmann::json body = nlohmann::json::parse(result->body);
  EXPECT_NE(body["error"]["message"].get<std::string>().find("/v1/nothing"), std::string::npos);
}

// HEAD gets the GET answer's head: its status and Content-Length, no body.
TEST_F(HttpServerTest, HeadIsAnsweredLikeGetWithoutTheBody) {
  httplib::Client client = Client();
  auto head = client.Head("/public");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
  EXPECT_EQ(head->get_header_value("Content-Length"), "11");  // {"ok":true}
  EXPECT_EQ(client.Get("/public")->body, "{\"ok\":true}");    // the connection is still usable
  EXPECT_EQ(client.Head("/echo", {{"Authorization", "Bearer sekret"}})->status, 405);
}

// A streamed answer to HEAD is its head alone (not even the last chunk), and the kept-alive
// connection answers the next request.
TEST_F(HttpServerTest, HeadOfAStreamIsItsHeadAlone) {
  const std::string answers =
      Exchange("HEAD /events HTTP/1.1\r\nHost: x\r\n\r\nGET /public HTTP/1.1\r\nHost: x\r\n\r\n",
               "{\"ok\":true}");
  EXPECT_EQ(answers.rfind("HTTP/1.1 200", 0), 0u) << answers;
  EXPECT_EQ(answers.find("data:"), std::string::npos) << answers;
  const size_t second = answers.find("HTTP/1.1 200", 1);
  ASSERT_NE(second, std::string::npos) << answers;
  EXPECT_EQ(answers.substr(answers.find("\r\n\r\n") + 4, second - answers.find("\r\n\r\n") - 4), "")
      << answers;
  EXPECT_NE(answers.find("{\"ok\":true}"), std::string::npos) << answers;
}

TEST_F(HttpServerTest, AKnownPathWithAnotherMethodIs405WithAllow) {
  auto result = Client().Get("/echo", {{"Authorization", "Bearer sekret"}});
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 405);
  EXPECT_EQ(result->get_header_value("Allow"), "POST");
  nlohmann::json body = nlohmann::json::parse(result->body);
  EXPECT_EQ(body["error"]["code"], "method_not_allowed");
  EXPECT_NE(body["error"]["message"].get<std::string>().find("/echo takes POST, not GET"),
            std::string::npos);
}

// "/items/*" takes every longer path under /items/, not /items/ itself; an exact route wins;
// another method on a matched path is a 405 naming the route's methods.
TEST_F(HttpServerTest, APrefixRouteMatchesLongerPathsOnly) {
  httplib::Client client = Client();
  EXPECT_EQ(client.Get("/items/42")->body, "item /items/42");
  EXPECT_EQ(client.Get("/items/a/b?x=1")->body, "item /items/a/b");
  EXPECT_EQ(client.Get("/items/special")->body, "special");
  EXPECT_EQ(client.Get("/items/")->status, 404);
  EXPECT_EQ(client.Get("/items")->status, 404);
  EXPECT_EQ(client.Get("/itemsx/1")->status, 404);
  auto post = client.Post("/items/42", "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->get_header_value("Allow"), "GET, HEAD");
}

TEST_F(HttpServerTest, OversizedBodyIs413) {
  auto result = Client().Post("/echo", {{"Authorization", "Bearer sekret"}}, std::string(4096, 'x'),
                              "text/plain");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 413);
  EXPECT_EQ(nlohmann::json::parse(result->body)["error"]["code"], "request_too_large");
}

// Short read deadlines: a request that stops arriving is answered 408 naming the deadline; an
// idle keep-alive connection is closed without an answer (a client reusing it would otherwise
// read a 408 as the answer to its next request).
class HttpServerDeadlineTest : public HttpServerTest {
 protected:
  HttpServerDeadlineTest() {
    header_timeout_ = 400ms;
    body_timeout_ = 400ms;
  }
};

TEST_F(HttpServerDeadlineTest, ABodyShortOfItsLengthIs408) {
  const std::string answer = Exchange(
      "POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sekret\r\n"
      "Content-Type: text/plain\r\nContent-Length: 100\r\n\r\nonly ten b",
      "--body-timeout");
  EXPECT_EQ(answer.rfind("HTTP/1.1 408", 0), 0u) << answer;
  EXPECT_NE(answer.find("\"code\":\"request_timeout\""), std::string::npos) << answer;
  EXPECT_NE(answer.find("request body did not arrive within 400 ms"), std::string::npos) << answer;
}

TEST_F(HttpServerDeadlineTest, AHeadThatStopsHalfwayIs408) {
  const std::string answer =
      Exchange("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Le", "--header-timeout");
  EXPECT_EQ(answer.rfind("HTTP/1.1 408", 0), 0u) << answer;
  EXPECT_NE(answer.find("request head did not arrive within 400 ms"), std::string::npos) << answer;
}

TEST_F(HttpServerDeadlineTest, AnIdleConnectionClosesWithoutAnAnswer) {
  const int fd = Connect();
  ASSERT_GE(fd, 0);
  const auto start = std::chrono::steady_clock::now();
  const std::string answer = ReadUntil(fd, "HTTP/1.1");  // until the server closes
  close(fd);
  EXPECT_EQ(answer, "");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);  // closed, not our 5 s read timeout
}

TEST_F(HttpServerDeadlineTest, AKeptAliveConnectionServesThenClosesQuietlyWhenIdle) {
  const int fd = Connect();
  ASSERT_GE(fd, 0);
  Send(fd, "GET /public HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string answer = ReadUntil(fd, "{\"ok\":true}");
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  const std::string after = ReadUntil(fd, "HTTP/1.1");  // idle past the head deadline
  close(fd);
  EXPECT_EQ(after, "");
}

// Every response reaches HttpOptions::on_response: the router's, a handler's and the HTTP layer's
// own refusals.
TEST_F(HttpServerTest, EveryResponseIsReportedWithItsStatus) {
  httplib::Client client = Client();
  client.Post("/echo", {{"Authorization", "Bearer sekret"}}, std::string(4096, 'x'), "text/plain");
  client.Get("/v1/nothing");
  client.Get("/public");
  int fd = Connect();
  ASSERT_GE(fd, 0);
  Send(fd, "NOT HTTP AT ALL\r\n\r\n");
  ReadUntil(fd, "\r\n\r\n");
  close(fd);
  std::lock_guard lock(statuses_mutex_);
  EXPECT_EQ(statuses_, (std::vector<int>{413, 401, 200, 400}));
}

TEST_F(HttpServerTest, PreflightIsAnsweredWithoutKey) {
  auto result = Client().Options("/echo", {{"Origin", "http://example.com"},
                                           {"Access-Control-Request-Method", "POST"},
                                           {"Access-Control-Request-Headers", "authorization"}});
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 204);
  EXPECT_EQ(result->get_header_value("Access-Control-Allow-Origin"), "http://example.com");
  EXPECT_EQ(result->get_header_value("Access-Control-Allow-Headers"), "authorization");
  // Stored responses and conversations are deleted with DELETE.
  EXPECT_NE(result->get_header_value("Access-Control-Allow-Methods").find("DELETE"),
            std::string::npos);
}

TEST_F(HttpServerTest, StreamedChunksArriveInOrder) {
  auto result = Client().Post("/stream", "", "text/plain");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->body, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
}

TEST_F(HttpServerTest, ExpectContinueGetsA100BeforeTheBody) {
  int fd = Connect();
  ASSERT_GE(fd, 0);
  Send(fd,
       "POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sekret\r\n"
       "Content-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(ReadUntil(fd, "\r\n\r\n"), "HTTP/1.1 100 Continue\r\n\r\n");
  Send(fd, "hello");
  std::string answer = ReadUntil(fd, "hello");
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  close(fd);
}

TEST_F(HttpServerTest, KeepAliveServesRequestsInTurn) {
  int fd = Connect();
  ASSERT_GE(fd, 0);
  for (int i = 0; i < 3; ++i) {
    Send(fd, "GET /public HTTP/1.1\r\nHost: x\r\n\r\n");
    std::string answer = ReadUntil(fd, "{\"ok\":true}");
    EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  }
  close(fd);
}

TEST_F(HttpServerTest, ShutdownLetsAStreamEndPastTheDrain) {
  int fd = Connect();
  ASSERT_GE(fd, 0);
  Send(fd, "POST /until-stop HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  EXPECT_NE(ReadUntil(fd, "tick").find("tick"), std::string::npos);
  auto start = std::chrono::steady_clock::now();
  std::thread stopper([this] { server_->Shutdown(300ms); });
  std::string rest = ReadUntil(fd, "0\r\n\r\n");
  stopper.join();
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_NE(rest.find("data: stopped"), std::string::npos);
  EXPECT_TRUE(rest.ends_with("0\r\n\r\n")) << "the chunked body ends cleanly";
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 5s);
  EXPECT_LT(Connect(), 0) << "no connections after a shutdown";
  close(fd);
}

TEST_F(HttpServerTest, HandlerSeesClientHangUp) {
  int fd = Connect();
  ASSERT_GE(fd, 0);
  Send(fd, "POST /wait HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  std::this_thread::sleep_for(200ms);  // let the handler start waiting
  close(fd);
  auto deadline = std::chrono::steady_clock::now() + 3s;
  while (!wait_done_ && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(wait_done_);
  EXPECT_TRUE(saw_close_);
}

}  // namespace
}  // namespace mkserve::server
