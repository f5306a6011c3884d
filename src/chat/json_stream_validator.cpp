#include "chat/json_stream_validator.h"

#include <cctype>

namespace mkserve::chat {

namespace {

bool IsJsonWhitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The validator sees one byte at a time: a byte of a multi-byte character is named by its value,
// so that the message stays valid UTF-8.
std::string Describe(char c) {
  const auto byte = static_cast<unsigned char>(c);
  if (byte < 0x20) return "control character " + std::to_string(byte);
  if (byte >= 0x80) return "byte " + std::to_string(byte) + " (not JSON syntax)";
  return std::string("'") + c + "'";
}

}  // namespace

JsonStreamValidator::Event JsonStreamValidator::Fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
  return Event::kError;
}

JsonStreamValidator::Event JsonStreamValidator::Push(char c) {
  if (!error_.empty()) return Event::kError;
  if (in_string_) return PushString(c);
  if (in_number_) {
    if (PushNumber(c)) return error_.empty() ? Event::kScalar : Event::kError;
    if (!error_.empty()) return Event::kError;
  }
  if (!literal_rest_.empty()) {
    if (c != literal_rest_[0]) return Fail("invalid literal near " + Describe(c));
    literal_rest_.erase(0, 1);
    if (literal_rest_.empty()) FinishValue();
    return Event::kScalar;
  }
  if (IsJsonWhitespace(c)) return Event::kWhitespace;
  return PushStructural(c);
}

bool JsonStreamValidator::Finish() {
  if (in_number_ && PushNumber(' ')) return false;
  return error_.empty() && complete();
}

JsonStreamValidator::Event JsonStreamValidator::PushString(char c) {
  Event char_event = string_is_key_ ? Event::kKeyChar : Event::kStringChar;
  if (escape_ == 1) {
    if (c == 'u') {
      escape_ = 2;
    } else if (std::string_view("\"\\/bfnrt").find(c) != std::string_view::npos) {
      escape_ = 0;
    } else {
      return Fail("invalid escape \\" + std::string(1, c) + " in string");
    }
    return char_event;
  }
  if (escape_ >= 2) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return Fail("invalid \\u escape in string");
    escape_ = escape_ == 5 ? 0 : escape_ + 1;
    return char_event;
  }
  if (c == '\\') {
    escape_ = 1;
    return char_event;
  }
  if (static_cast<unsigned char>(c) < 0x20) return Fail("unescaped " + Describe(c) + " in string");
  if (c != '"') return char_event;
  in_string_ = false;
  if (string_is_key_) {
    expect_ = Expect::kColon;
    return Event::kKeyEnd;
  }
  FinishValue();
  return Event::kStringEnd;
}

bool JsonStreamValidator::PushNumber(char c) {
  auto accept = [&](NumberState next) {
    number_ = next;
    return true;
  };
  switch (number_) {
    case NumberState::kSign:
      if (c == '0') return accept(NumberState::kZero);
      if (IsDigit(c)) return accept(NumberState::kInt);
      Fail("invalid number");
      return false;
    case NumberState::kZero:
    case NumberState::kInt:
      if (number_ == NumberState::kInt && IsDigit(c)) return true;
      if (c == '.') return accept(NumberState::kFracStart);
      if (c == 'e' || c == 'E') return accept(NumberState::kExpStart);
      break;
    case NumberState::kFracStart:
      if (IsDigit(c)) return accept(NumberState::kFrac);
      Fail("invalid number");
      return false;
    case NumberState::kFrac:
      if (IsDigit(c)) return true;
      if (c == 'e' || c == 'E') return accept(NumberState::kExpStart);
      break;
    case NumberState::kExpStart:
      if (c == '+' || c == '-') return accept(NumberState::kExpSign);
      [[fallthrough]];
    case NumberState::kExpSign:
      if (IsDigit(c)) return accept(NumberState::kExp);
      Fail("invalid number");
      return false;
    case NumberState::kExp:
      if (IsDigit(c)) return true;
      break;
  }
  in_number_ = false;  // `c` is not part of the number, which ended in an accepting state
  FinishValue();
  return false;
}

JsonStreamValidator::Event JsonStreamValidator::PushStructural(char c) {
  switch (expect_) {
    case Expect::kValueOrClose:
      if (c == ']') return Close(c);
      return StartValue(c);
    case Expect::kValue:
      return StartValue(c);
    case Expect::kKeyOrClose:
      if (c == '}') return Close(c);
      [[fallthrough]];
    case Expect::kKey:
      if (c != '"') return Fail("expected an object key, found " + Describe(c));
      in_string_ = string_is_key_ = true;
      return Event::kKeyStart;
    case Expect::kColon:
      if (c != ':') return Fail("expected ':', found " + Describe(c));
      expect_ = Expect::kValue;
      return Event::kPunctuation;
    case Expect::kCommaOrClose:
      if (c == ',') {
        expect_ = stack_.back() == '[' ? Expect::kValue : Expect::kKey;
        return Event::kPunctuation;
      }
      if ((c == ']' && stack_.back() == '[') || (c == '}' && stack_.back() == '{')) return Close(c);
      return Fail("expected ',' or a closing bracket, found " + Describe(c));
    case Expect::kDone:
      return Fail("unexpected " + Describe(c) + " after the end of the JSON value");
  }
  return Fail("invalid state");
}

JsonStreamValidator::Event JsonStreamValidator::StartValue(char c) {
  if (c == '{' || c == '[') {
    stack_.push_back(c);
    expect_ = c == '{' ? Expect::kKeyOrClose : Expect::kValueOrClose;
    return Event::kOpen;
  }
  if (c == '"') {
    in_string_ = true;
    string_is_key_ = false;
    return Event::kStringStart;
  }
  if (c == '-' || IsDigit(c)) {
    in_number_ = true;
    number_ = NumberState::kSign;
    if (c != '-') PushNumber(c);
    return Event::kScalar;
  }
  if (c == 't') literal_rest_ = "rue";
  if (c == 'f') literal_rest_ = "alse";
  if (c == 'n') literal_rest_ = "ull";
  if (!literal_rest_.empty()) return Event::kScalar;
  return Fail("expected a JSON value, found " + Describe(c));
}

JsonStreamValidator::Event JsonStreamValidator::Close(char c) {
  (void)c;
  stack_.pop_back();
  FinishValue();
  return Event::kClose;
}

void JsonStreamValidator::FinishValue() {
  expect_ = stack_.empty() ? Expect::kDone : Expect::kCommaOrClose;
}

}  // namespace mkserve::chat
