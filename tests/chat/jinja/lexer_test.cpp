#include "chat/jinja/lexer.h"

#include <gtest/gtest.h>

#include "chat/jinja/render_helper.h"
#include "chat/jinja/template_error.h"

namespace mkserve::chat::jinja {
namespace {

TEST(LexerTest, TokenizesExpressions) {
  std::vector<Token> tokens = Tokenize("a{{ x.y[0] | f(1.5, 'q\\n') ~ \"z\" }}b");
  std::vector<std::string> texts;
  for (const Token& token : tokens) texts.push_back(token.text);
  std::vector<std::string> expected = {"a", "",    "x", ".",   "y", "[", "0", "]", "|", "f",
                                       "(", "1.5", ",", "q\n", ")", "~", "z", "",  "b", ""};
  EXPECT_EQ(texts, expected);
  EXPECT_EQ(tokens[6].kind, TokenKind::kInteger);
  EXPECT_EQ(tokens[11].kind, TokenKind::kFloat);
  EXPECT_DOUBLE_EQ(tokens[11].float_value, 1.5);
  EXPECT_EQ(tokens[13].kind, TokenKind::kString);
}

TEST(LexerTest, DictLiteralClosingBracesAreNotTheTagEnd) {
  EXPECT_EQ(RenderText("{{ {'a': {'b': 1}}['a']['b'] }}"), "1");
}

// transformers sets trim_blocks and lstrip_blocks: a block tag alone on its line vanishes.
TEST(LexerTest, TrimBlocksAndLstripBlocks) {
  EXPECT_EQ(RenderText("a\n    {% if true %}\n  b\n    {% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(RenderText("x  {% if true %}y{% endif %}"), "x  y");  // not alone on its line
  EXPECT_EQ(RenderText("  {# note #}\nz"), "z");
  EXPECT_EQ(RenderText("  {{ 'v' }}\n"),
            "  v");  // variables are not stripped; one final newline is dropped
}

TEST(LexerTest, ExplicitWhitespaceControl) {
  EXPECT_EQ(RenderText("a \n {{- 'b' -}} \n c"), "abc");
  EXPECT_EQ(RenderText("a\n{%- if true -%}\n  b  {%- endif %}"), "ab");
  EXPECT_EQ(RenderText("a\n  {%+ if true %}b{% endif %}"), "a\n  b");
  EXPECT_EQ(RenderText("{% if true +%}\nb{% endif %}"), "\nb");
}

TEST(LexerTest, NewlinesAreNormalisedAndOneTrailingNewlineDropped) {
  EXPECT_EQ(RenderText("a\r\nb\n\n"), "a\nb\n");
}

TEST(LexerTest, StringEscapes) {
  EXPECT_EQ(RenderText(R"({{ "tab\tq\"s\'\\ \u00e9\x41" }})"),
            "tab\tq\"s'\\ \xC3\xA9"
            "A");
}

TEST(LexerTest, ErrorsNameTheLine) {
  EXPECT_EQ(RenderError("ok\n\n{{ 'open "), "chat template line 3: unterminated string literal");
  EXPECT_EQ(RenderError("a\n{# never closed"), "chat template line 2: unterminated comment");
  EXPECT_EQ(RenderError("a\n{{ x "), "chat template line 2: unterminated tag");
  EXPECT_EQ(RenderError("{{ x ; y }}"), "chat template line 1: unexpected character ';' in tag");
}

}  // namespace
}  // namespace mkserve::chat::jinja
