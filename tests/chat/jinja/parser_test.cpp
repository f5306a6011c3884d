#include "chat/jinja/parser.h"

#include <gtest/gtest.h>

#include "chat/jinja/render_helper.h"

namespace mkserve::chat::jinja {

namespace {

TEST(ParserTest, PrecedenceFollowsJinja2) {
  EXPECT_EQ(RenderText("{{ 1 + 2 * 3 ** 2 }}"), "19");
  EXPECT_EQ(RenderText("{{ 'a' ~ 2 * 3 }}"), "a6");  // * binds tighter than ~
  // ~ binds tighter than +, so this is ('a' ~ 1) + 2: a type error in Python.
  EXPECT_EQ(RenderError("{{ 'a' ~ 1 + 2 }}"),
            "chat template line 1: unsupported operand types for +: 'str' and 'int'");
  EXPECT_EQ(RenderText("{{ -2 | abs }}"), "2");       // the filter applies to -2
  EXPECT_EQ(RenderText("{{ not 1 == 2 }}"), "True");  // not (1 == 2)
  EXPECT_EQ(RenderText("{{ 'x' if 0 else 'y' if 1 else 'z' }}"), "y");
  EXPECT_EQ(RenderText("{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}"), "True|False");
  EXPECT_EQ(RenderText("{{ 2 is divisibleby 2 and 3 is odd }}"), "True");
}

TEST(ParserTest, SyntaxErrorsNameTheLine) {
  EXPECT_EQ(RenderError("\n{% if x %}open"),
            "chat template line 2: missing {% endif %} before the end of the template");
  EXPECT_EQ(RenderError("{{ 1 + }}"), "chat template line 1: expected an expression (found '}}')");
  EXPECT_EQ(RenderError("a\nb\n{% for x y %}{% endfor %}"),
            "chat template line 3: expected 'in' in for loop");
  EXPECT_EQ(RenderError("{{ f(a=1, 2) }}"),
            "chat template line 1: positional argument after keyword argument (found '2')");
}

TEST(ParserTest, UnsupportedConstructsAreErrors) {
  EXPECT_EQ(RenderError("x\n{% include 'other.jinja' %}"),
            "chat template line 2: unsupported tag '{% include %}'");
  EXPECT_EQ(RenderError("{% extends 'base' %}"),
            "chat template line 1: unsupported tag '{% extends %}'");
  EXPECT_EQ(RenderError("{% for x in y recursive %}{% endfor %}"),
            "chat template line 1: recursive for loops are not supported");
  EXPECT_EQ(RenderError("{% raw %}x{% endraw %}"),
            "chat template line 1: unsupported tag '{% raw %}'");
}

TEST(ParserTest, ParsesRealTemplateShapes) {
  Body body = ParseTemplate(
      "{%- for m in messages if m.role != 'system' -%}{{ m.content }}{%- else -%}none{%- endfor "
      "-%}");
  ASSERT_EQ(body.size(), 1u);
  EXPECT_EQ(body[0]->kind, StmtKind::kFor);
  const auto& loop = static_cast<const ForStmt&>(*body[0]);
  EXPECT_NE(loop.filter, nullptr);
  EXPECT_EQ(loop.else_body.size(), 1u);
}

}  // namespace
}  // namespace mkserve::chat::jinja
