// The tiny tokenizer, trained and loaded for the running test: a folder per test, since ctest runs
// the tests of one file at once.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "tokenizer/tiny_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace mkserve::server {

inline std::shared_ptr<const tokenizer::Tokenizer> TinyTokenizerForTest() {
  const auto dir = std::filesystem::temp_directory_path() /
                   (std::string("mkserve_tokenizer_") +
                    ::testing::UnitTest::GetInstance()->current_test_suite()->name() + "_" +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::create_directories(dir);
  tokenizer::WriteTinyTokenizer(dir);
  auto tok = std::make_shared<const tokenizer::Tokenizer>(tokenizer::Tokenizer::Load(dir));
  std::filesystem::remove_all(dir);
  return tok;
}

}  // namespace mkserve::server
