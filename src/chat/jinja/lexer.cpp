#include "chat/jinja/lexer.h"

#include <cctype>

#include "chat/jinja/template_error.h"
#include "common/utf8.h"

namespace mkserve::chat::jinja {

namespace {

bool IsInlineSpace(char c) { return c == ' ' || c == '\t'; }
bool IsWhitespace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : source_(source) {}

  std::vector<Token> Run() {
    while (pos_ < source_.size()) {
      size_t tag = FindTagStart(pos_);
      AddText(source_.substr(pos_, tag - pos_));
      if (tag == source_.size()) break;
      pos_ = tag;
      LexTag();
    }
    tokens_.push_back({TokenKind::kEnd, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t FindTagStart(size_t from) const {
    for (size_t i = from; i + 1 < source_.size(); ++i) {
      char next = source_[i + 1];
      if (source_[i] == '{' && (next == '{' || next == '%' || next == '#')) return i;
    }
    return source_.size();
  }

  void AddText(std::string_view text) {
    std::string value(text);
    if (strip_next_text_) {
      size_t start = 0;
      while (start < value.size() && IsWhitespace(value[start])) ++start;
      value.erase(0, start);
    } else if (trim_next_newline_) {
      if (value.rfind("\r\n", 0) == 0) {
        value.erase(0, 2);
      } else if (!value.empty() && value[0] == '\n') {
        value.erase(0, 1);
      }
    }
    strip_next_text_ = trim_next_newline_ = false;
    CountLines(text);
    if (!value.empty()) tokens_.push_back({TokenKind::kText, std::move(value), text_line_});
    text_line_ = line_;
  }

  void CountLines(std::string_view text) {
    for (char c : text) line_ += c == '\n';
  }

  // Applies `{%-` (strip all whitespace before) or lstrip_blocks to the preceding text token.
  void StripBefore(size_t tag_start, char modifier, bool is_block) {
    if (tokens_.empty() || tokens_.back().kind != TokenKind::kText) return;
    std::string& text = tokens_.back().text;
    if (modifier == '-') {
      while (!text.empty() && IsWhitespace(text.back())) text.pop_back();
    } else if (is_block && modifier != '+') {
      size_t i = tag_start;
      while (i > 0 && IsInlineSpace(source_[i - 1])) --i;
      if (i == 0 || source_[i - 1] == '\n') text.resize(text.size() - (tag_start - i));
    }
    if (text.empty()) tokens_.pop_back();
  }

  void LexTag() {
    char kind = source_[pos_ + 1];
    size_t tag_start = pos_;
    char modifier = pos_ + 2 < source_.size() ? source_[pos_ + 2] : '\0';
    bool has_modifier = modifier == '-' || modifier == '+';
    StripBefore(tag_start, has_modifier ? modifier : '\0', kind != '{');
    pos_ += has_modifier ? 3 : 2;
    text_line_ = line_;
    if (kind == '#') {
      LexComment();
    } else {
      LexExpressionTag(kind == '{');
    }
    text_line_ = line_;
  }

  void LexComment() {
    size_t end = source_.find("#}", pos_);
    if (end == std::string_view::npos) throw TemplateError("unterminated comment", line_);
    CountLines(source_.substr(pos_, end - pos_));
    SetAfterTag(end > pos_ ? source_[end - 1] : '\0', true);
    pos_ = end + 2;
  }

  void SetAfterTag(char modifier, bool is_block) {
    strip_next_text_ = modifier == '-';
    trim_next_newline_ = is_block && modifier != '+' && modifier != '-';
  }

  void LexExpressionTag(bool is_variable) {
    tokens_.push_back(
        {is_variable ? TokenKind::kVariableBegin : TokenKind::kBlockBegin, "", line_});
    char closer = is_variable ? '}' : '%';
    int depth = 0;  // brackets open inside the tag: `}}` inside a dict literal is not the end
    while (true) {
      while (pos_ < source_.size() && IsWhitespace(source_[pos_])) {
        line_ += source_[pos_] == '\n';
        ++pos_;
      }
      if (pos_ >= source_.size()) throw TemplateError("unterminated tag", line_);
      if (depth == 0 && TryCloseTag(closer, is_variable)) return;
      LexExpressionToken(depth);
    }
  }

  bool TryCloseTag(char closer, bool is_variable) {
    std::string_view rest = source_.substr(pos_);
    char modifier = '\0';
    if (rest.size() >= 3 && (rest[0] == '-' || rest[0] == '+') && rest[1] == closer &&
        rest[2] == '}') {
      modifier = rest[0];
      pos_ += 3;
    } else if (rest.size() >= 2 && rest[0] == closer && rest[1] == '}') {
      pos_ += 2;
    } else {
      return false;
    }
    tokens_.push_back({is_variable ? TokenKind::kVariableEnd : TokenKind::kBlockEnd, "", line_});
    SetAfterTag(modifier, !is_variable);
    return true;
  }

  void LexExpressionToken(int& depth) {
    char c = source_[pos_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') return LexName();
    if (std::isdigit(static_cast<unsigned char>(c))) return LexNumber();
    if (c == '"' || c == '\'') return LexString(c);
    LexOperator(depth);
  }

  void LexName() {
    size_t start = pos_;
    while (pos_ < source_.size() &&
           (std::isalnum(static_cast<unsigned char>(source_[pos_])) || source_[pos_] == '_')) {
      ++pos_;
    }
    tokens_.push_back({TokenKind::kName, std::string(source_.substr(start, pos_ - start)), line_});
  }

  void LexNumber();
  void LexString(char quote);
  void LexOperator(int& depth);
  char32_t ReadEscape();

  std::string_view source_;
  size_t pos_ = 0;
  int line_ = 1;
  int text_line_ = 1;
  bool strip_next_text_ = false;
  bool trim_next_newline_ = false;
  std::vector<Token> tokens_;
};

void Lexer::LexNumber() {
  size_t start = pos_;
  bool is_float = false;
  auto digits = [&] {
    while (pos_ < source_.size() &&
           (std::isdigit(static_cast<unsigned char>(source_[pos_])) || source_[pos_] == '_'))
      ++pos_;
  };
  digits();
  if (pos_ + 1 < source_.size() && source_[pos_] == '.' &&
      std::isdigit(static_cast<unsigned char>(source_[pos_ + 1]))) {
    is_float = true;
    ++pos_;
    digits();
  }
  if (pos_ < source_.size() && (source_[pos_] == 'e' || source_[pos_] == 'E')) {
    size_t save = pos_++;
    if (pos_ < source_.size() && (source_[pos_] == '+' || source_[pos_] == '-')) ++pos_;
    if (pos_ < source_.size() && std::isdigit(static_cast<unsigned char>(source_[pos_]))) {
      is_float = true;
      digits();
    } else {
      pos_ = save;
    }
  }
  std::string text;
  for (char c : source_.substr(start, pos_ - start)) {
    if (c != '_') text += c;
  }
  Token token{is_float ? TokenKind::kFloat : TokenKind::kInteger, text, line_};
  try {
    if (is_float) {
      token.float_value = std::stod(text);
    } else {
      token.int_value = std::stoll(text);
    }
  } catch (const std::exception&) {
    throw TemplateError("number literal '" + text + "' is out of range", line_);
  }
  tokens_.push_back(token);
}

char32_t Lexer::ReadEscape() {
  char c = source_[pos_++];
  switch (c) {
    case 'n':
      return '\n';
    case 't':
      return '\t';
    case 'r':
      return '\r';
    case 'b':
      return '\b';
    case 'f':
      return '\f';
    case 'v':
      return '\v';
    case 'a':
      return '\a';
    case '0':
      return '\0';
    case 'x':
    case 'u':
    case 'U': {
      int count = c == 'x' ? 2 : c == 'u' ? 4 : 8;
      if (pos_ + count > source_.size())
        throw TemplateError("truncated \\" + std::string(1, c) + " escape", line_);
      std::string hex(source_.substr(pos_, count));
      pos_ += count;
      try {
        return static_cast<char32_t>(std::stoul(hex, nullptr, 16));
      } catch (const std::exception&) {
        throw TemplateError("bad \\" + std::string(1, c) + " escape '" + hex + "'", line_);
      }
    }
    default:
      return static_cast<unsigned char>(c);  // \\ \' \" and unknown escapes keep the char
  }
}

void Lexer::LexString(char quote) {
  int start_line = line_;
  ++pos_;
  std::string value;
  while (true) {
    if (pos_ >= source_.size()) throw TemplateError("unterminated string literal", start_line);
    char c = source_[pos_];
    if (c == quote) break;
    if (c == '\\' && pos_ + 1 < source_.size()) {
      ++pos_;
      char next = source_[pos_];
      if (next == '\n') {  // backslash-newline continues the literal
        ++line_;
        ++pos_;
        continue;
      }
      AppendUtf8(value, ReadEscape());
      continue;
    }
    line_ += c == '\n';
    value += c;
    ++pos_;
  }
  ++pos_;
  tokens_.push_back({TokenKind::kString, std::move(value), start_line});
}

void Lexer::LexOperator(int& depth) {
  static const char* const kTwoChar[] = {"**", "//", "==", "!=", "<=", ">="};
  std::string_view rest = source_.substr(pos_);
  for (const char* op : kTwoChar) {
    if (rest.substr(0, 2) == op) {
      tokens_.push_back({TokenKind::kOperator, op, line_});
      pos_ += 2;
      return;
    }
  }
  char c = rest[0];
  static const std::string_view kSingle = "+-*/%~<>=()[]{}.,:|";
  if (kSingle.find(c) == std::string_view::npos) {
    throw TemplateError("unexpected character '" + std::string(1, c) + "' in tag", line_);
  }
  if (c == '(' || c == '[' || c == '{') ++depth;
  if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
  tokens_.push_back({TokenKind::kOperator, std::string(1, c), line_});
  ++pos_;
}

}  // namespace

std::vector<Token> Tokenize(std::string_view source) {
  // jinja2 normalises newlines to "\n" and, without keep_trailing_newline, drops one final one.
  std::string normalized;
  normalized.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      normalized += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      normalized += source[i];
    }
  }
  if (!normalized.empty() && normalized.back() == '\n') normalized.pop_back();
  return Lexer(normalized).Run();
}

}  // namespace mkserve::chat::jinja
