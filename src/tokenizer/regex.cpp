#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "common/error.h"
#include "common/utf8.h"

namespace mkserve::tokenizer {

namespace {

// Long runs of whitespace with look-ahead need more than PCRE2's default 32 KiB JIT stack.
constexpr size_t kJitStackBytes = 1 << 20;

struct ThreadScratch {
  pcre2_match_data* match_data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, kJitStackBytes, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  ThreadScratch() { pcre2_jit_stack_assign(context, nullptr, jit_stack); }
  ~ThreadScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_data_free(match_data);
  }
};

ThreadScratch& Scratch() {
  thread_local ThreadScratch scratch;
  return scratch;
}

std::string ErrorMessage(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

Regex::Regex(std::string_view pattern) : pattern_(pattern), code_(std::make_unique<Code>()) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code_->code == nullptr) {
    throw Error("regex '" + pattern_ + "' does not compile at offset " +
                std::to_string(error_offset) + ": " + ErrorMessage(error_code));
  }
  // JIT is an optimisation only: the interpreter gives the same matches when it is unavailable.
  pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

std::vector<Span> Regex::FindAll(std::string_view text) const {
  std::vector<Span> matches;
  ThreadScratch& scratch = Scratch();
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  while (offset <= text.size()) {
    int rc = pcre2_match(code_->code, subject, text.size(), offset, PCRE2_NO_UTF_CHECK,
                         scratch.match_data, scratch.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0 && rc != 0) {
      throw Error("regex '" + pattern_ + "' failed to match: " + ErrorMessage(rc));
    }
    PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.match_data);
    size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      matches.push_back({begin, end});
      offset = end;
    } else {
      if (begin >= text.size()) break;
      offset = begin + Utf8SequenceLength(static_cast<unsigned char>(text[begin]));
    }
  }
  return matches;
}

std::string RegexEscape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-/#").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace mkserve::tokenizer
