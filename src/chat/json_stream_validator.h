// Checks JSON syntax one character at a time, so a streamed tool-call body can be forwarded
// while it is generated and rejected at the first character that makes it invalid. It also
// reports what each character was (key, string, container open/close, ...) and the container
// depth, which is what the Command-4 action parser needs to find names and arguments.
#pragma once

#include <string>
#include <vector>

namespace mkserve::chat {

class JsonStreamValidator {
 public:
  enum class Event {
    kError,
    kWhitespace,
    kPunctuation,  // ':' or ','
    kOpen,         // '{' or '['
    kClose,        // '}' or ']'
    kKeyStart,     // opening quote of an object key
    kKeyChar,
    kKeyEnd,       // closing quote of an object key
    kStringStart,  // opening quote of a string value
    kStringChar,
    kStringEnd,
    kScalar,  // a character of a number, true, false or null
  };

  // Feeds one character. After kError every further call returns kError.
  Event Push(char c);
  // Ends the input: a number at the very end is complete only now.
  bool Finish();

  size_t depth() const { return stack_.size(); }
  bool in_string() const { return in_string_; }
  // A whole value has been read and nothing but whitespace followed.
  bool complete() const { return expect_ == Expect::kDone && !in_number_; }
  const std::string& error() const { return error_; }

 private:
  enum class Expect { kValue, kValueOrClose, kKeyOrClose, kKey, kColon, kCommaOrClose, kDone };
  enum class NumberState { kSign, kZero, kInt, kFracStart, kFrac, kExpStart, kExpSign, kExp };

  Event Fail(std::string message);
  Event PushString(char c);
  bool PushNumber(char c);  // false: the number ended before `c`
  Event PushStructural(char c);
  Event StartValue(char c);
  Event Close(char c);
  void FinishValue();

  std::vector<char> stack_;
  Expect expect_ = Expect::kValue;
  bool in_string_ = false;
  bool string_is_key_ = false;
  int escape_ = 0;  // 0: none, 1: after '\', 2..5: reading \u hex digits
  bool in_number_ = false;
  NumberState number_ = NumberState::kSign;
  std::string literal_rest_;  // remaining letters of true/false/null
  std::string error_;
};

}  // namespace mkserve::chat
