// The pieces of `mkserve bench-serve` that take user input: the base URL and the prompt set,
// including the one shipped in data/bench.
#include <gtest/gtest.h>

#include <fstream>

#include "common/error.h"
#include "server/base_url.h"
#include "server/load_generator.h"
#include "server/prompt_set.h"

namespace mkserve::server {
namespace {

TEST(BaseUrlTest, AcceptsTheBaseUrlAsClientsWriteIt) {
  for (const char* url : {"http://host:8000/v1", "http://host:8000/v1/", "http://host:8000",
                          "http://host:8000/", "http://host:8000/v1//"}) {
    BaseUrl parsed = ParseBaseUrl(url);
    EXPECT_EQ(parsed.origin, "http://host:8000") << url;
    EXPECT_EQ(parsed.api_path, "/v1") << url;
  }
  BaseUrl proxied = ParseBaseUrl("http://gateway/mkserve/v1/");
  EXPECT_EQ(proxied.origin, "http://gateway");
  EXPECT_EQ(proxied.api_path, "/mkserve/v1");
}

TEST(BaseUrlTest, RefusesWhatItCannotReach) {
  auto error_of = [](const char* url) {
    try {
      ParseBaseUrl(url);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("https://host/v1").find("https"), std::string::npos);
  EXPECT_NE(error_of("host:8000/v1").find("does not start with http://"), std::string::npos);
  EXPECT_NE(error_of("http:///v1").find("no host"), std::string::npos);
  EXPECT_NE(error_of("http://host/v1?x=1").find("query"), std::string::npos);
}

std::filesystem::path WriteFile(const std::string& name, const std::string& text) {
  std::filesystem::path path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path;
}

TEST(PromptSetTest, ReadsOnePromptALineAndNamesABadLine) {
  auto good =
      WriteFile("mkserve_prompts_ok.jsonl", "{\"prompt\": \"a\"}\n\n{\"prompt\": \"b\\nc\"}\n");
  EXPECT_EQ(LoadPromptSet(good), (std::vector<std::string>{"a", "b\nc"}));
  auto bad = WriteFile("mkserve_prompts_bad.jsonl", "{\"prompt\": \"a\"}\n{\"text\": \"b\"}\n");
  try {
    LoadPromptSet(bad);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mkserve_prompts_bad.jsonl:2"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(LoadPromptSet(WriteFile("mkserve_prompts_empty.jsonl", "\n")), Error);
  EXPECT_THROW(LoadPromptSet("/nonexistent/prompts.jsonl"), Error);
}

// Coding prompts from about 200 to about 8K tokens (at ~3.5 characters a token).
TEST(PromptSetTest, TheShippedCodingSetSpansShortToLongPrompts) {
  std::vector<std::string> prompts =
      LoadPromptSet(std::filesystem::path(MKSERVE_SOURCE_DIR) / "data/bench/coding_prompts.jsonl");
  ASSERT_GE(prompts.size(), 6u);
  size_t shortest = prompts[0].size(), longest = prompts[0].size();
  for (const std::string& prompt : prompts) {
    shortest = std::min(shortest, prompt.size());
    longest = std::max(longest, prompt.size());
  }
  EXPECT_LE(shortest, 1500u);
  EXPECT_GE(longest, 24000u);
  EXPECT_LE(longest, 32000u);
}

TEST(LoadReportTest, JsonCarriesEveryNumber) {
  LoadReport report;
  report.num_succeeded = 2;
  report.num_failed = 1;
  report.errors = {"HTTP 503: busy"};
  report.duration_s = 2.0;
  report.output_tokens = 10;
  report.ttft_s = {0.1, 0.3};
  report.itl_s = {0.01, 0.02};
  report.decode_tok_s = {50, 100};
  Json json = ReportJson(report);
  EXPECT_EQ(json["requests_failed"], 1);
  EXPECT_EQ(json["errors"][0], "HTTP 503: busy");
  EXPECT_DOUBLE_EQ(json["output_tok_s"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(json["ttft_ms"]["p50"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(json["ttft_ms"]["p99"].get<double>(), 300.0);
  EXPECT_DOUBLE_EQ(json["decode_tok_s_per_request"]["slowest"].get<double>(), 50.0);
}

}  // namespace
}  // namespace mkserve::server
