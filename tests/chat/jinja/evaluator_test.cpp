#include "chat/jinja/evaluator.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/jinja/render_helper.h"

namespace mkserve::chat::jinja {
namespace {

using Json = nlohmann::ordered_json;

TEST(EvaluatorTest, PrintsValuesLikePython) {
  Json context = {{"b", true}, {"n", nullptr}, {"l", {1, "a"}}, {"f", 2.0}};
  EXPECT_EQ(RenderText("{{ b }} {{ n }} {{ l }} {{ f }} {{ 7 / 2 }} {{ 4 / 2 }}", context),
            "True None [1, 'a'] 2.0 3.5 2.0");
}

TEST(EvaluatorTest, PythonArithmetic) {
  EXPECT_EQ(RenderText("{{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** -1 }} {{ 'ab' * 2 }} {{ "
                       "[0] * 3 }} {{ 1 + 1.5 }}"),
            "-4 2 -2 0.5 abab [0, 0, 0] 2.5");
  EXPECT_EQ(RenderError("{{ 1 / 0 }}"), "chat template line 1: division by zero");
  EXPECT_EQ(RenderError("{{ 'a' - 1 }}"),
            "chat template line 1: unsupported operand types for -: 'str' and 'int'");
}

TEST(EvaluatorTest, LoopVariablesAndFilters) {
  EXPECT_EQ(
      RenderText(
          "{% for x in [5, 6, 7, 8] if x != 6 %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex "
          "}}"
          "{{ loop.revindex0 }}{{ loop.length }}{{ loop.first }}{{ loop.last }}{{ loop.previtem }}-"
          "{{ loop.nextitem }}{{ loop.cycle('a', 'b') }};{% endfor %}"),
      "10323TrueFalse-7a;21213FalseFalse5-8b;32103FalseTrue7-a;");
  // As jinja2's LoopContext, `loop` is one object that moves on: a kept reference sees the last
  // iteration, and a nested loop's own `loop` leaves the outer one as it was.
  EXPECT_EQ(RenderText("{% set ns = namespace(l=none) %}{% for x in 'abc' %}{% if loop.first %}"
                       "{% set ns.l = loop %}{% endif %}{% for y in 'de' %}{% endfor %}"
                       "{{ loop.index }}{% endfor %}{{ ns.l.index }}{{ ns.l.previtem }}"
                       "{{ ns.l.cycle(1, 2, 3, 4) }}"),
            "1233b3");
  EXPECT_EQ(RenderText("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}{{ v }}{% endfor %}"),
            "a1b2");
  EXPECT_EQ(RenderText("{% for c in 'hé' %}[{{ c }}]{% endfor %}{% for x in missing %}no{% else "
                       "%}empty{% endfor %}"),
            "[h][é]empty");
  EXPECT_EQ(RenderText("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == "
                       "4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "013");
}

TEST(EvaluatorTest, ScopingFollowsJinja2) {
  // A set inside a loop stays in the loop; a namespace carries values out.
  EXPECT_EQ(RenderText("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(RenderText("{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i "
                       "%}{% endfor %}{{ ns.x }}"),
            "4");
  EXPECT_EQ(RenderText("{% if true %}{% set y = 3 %}{% endif %}{{ y }}"), "3");
  EXPECT_EQ(RenderError("{% set d = {} %}{% set d.x = 1 %}"),
            "chat template line 1: cannot assign attribute 'x' on 'd': only namespace() objects "
            "accept attribute assignment");
  EXPECT_EQ(RenderText("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(RenderText("{% set t = 1, 'x' %}{{ t }} {{ (1,) }} {{ () }} {{ t | list }}"),
            "(1, 'x') (1,) () [1, 'x']");
  EXPECT_EQ(RenderText("{% set block %}x{{ 1 + 1 }}{% endset %}[{{ block }}]"), "[x2]");
}

TEST(EvaluatorTest, Macros) {
  EXPECT_EQ(RenderText("{% macro m(a, b='B', c=none) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) "
                       "}}|{{ m(1, c=3) }}|{{ m(b=2, a=0) }}"),
            "1BNone|1B3|02None");
  EXPECT_EQ(RenderText("{% set g = 'G' %}{% macro m() %}{{ g }}{% set g = 'L' %}{{ g }}{% endmacro "
                       "%}{{ m() }}{{ g }}"),
            "GLG");
  EXPECT_EQ(RenderError("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}"),
            "chat template line 1: macro 'm' recursed too deeply");
}

TEST(EvaluatorTest, UndefinedBehavesLikeJinja2Default) {
  Json context = {{"d", {{"k", "v"}}}};
  EXPECT_EQ(RenderText("[{{ missing }}][{{ d.nope }}][{{ missing | length }}][{{ missing is "
                       "defined }}][{{ not missing }}]",
                       context),
            "[][][0][False][True]");
  EXPECT_EQ(
      RenderText("{{ missing ~ 'x' }} {{ missing == missing }} {{ d.nope | default('dflt') }}",
                 context),
      "x True dflt");
  EXPECT_EQ(RenderError("line1\n{{ missing.attr }}"),
            "chat template line 2: 'missing' is undefined (reading attribute 'attr')");
  EXPECT_EQ(RenderError("{{ missing + 1 }}"),
            "chat template line 1: 'missing' is undefined (used with '+')");
  EXPECT_EQ(RenderError("{{ nothing() }}"),
            "chat template line 1: 'nothing' is undefined (called as a function)");
}

TEST(EvaluatorTest, SubscriptsAndSlices) {
  Json context = {{"l", {1, 2, 3, 4}}, {"s", "héllo"}};
  EXPECT_EQ(RenderText("{{ l[-1] }} {{ l[1:3] }} {{ l[::-2] }} {{ l[10] is defined }} {{ s[1] }} "
                       "{{ s[1:3] }} {{ s[::-1] }} {{ l.0 }}",
                       context),
            "4 [2, 3] [4, 2] False é él olléh 1");
  EXPECT_EQ(RenderError("{{ none[0] }}"),
            "chat template line 1: 'NoneType' object is not subscriptable");
}

TEST(EvaluatorTest, RaiseExceptionAndStrftime) {
  EXPECT_EQ(RenderError("a\n{{ raise_exception('Roles must alternate') }}"),
            "chat template line 2: raise_exception: Roles must alternate");
  std::string year = RenderText("{{ strftime_now('%Y') }}");
  ASSERT_EQ(year.size(), 4u);
  EXPECT_GE(std::stoi(year), 2024);
}

TEST(EvaluatorTest, GenerationBlockRendersItsBody) {
  EXPECT_EQ(RenderText("a{% generation %}b{% endgeneration %}c"), "abc");
}

TEST(EvaluatorTest, ContextDefaultsLikeTransformers) {
  EXPECT_EQ(RenderText("{{ tools is none }} {{ documents is none }} {{ add_generation_prompt }}"),
            "True True False");
  EXPECT_EQ(RenderError("x", Json::array()), "chat template context must be a JSON object");
}

}  // namespace
}  // namespace mkserve::chat::jinja

namespace mkserve::chat::jinja {
namespace {

// Hostile or broken templates fail with an error instead of exhausting the stack, memory or time.
TEST(EvaluatorLimitsTest, RunawayTemplatesFail) {
  EXPECT_EQ(RenderError("{% set l = [] %}{% set _ = l.append(l) %}{{ l }}"),
            "chat template line 1: value nested too deeply to print");
  EXPECT_EQ(RenderError("{% set l = [] %}{% set _ = l.append(l) %}{{ l | tojson }}"),
            "chat template line 1: value nested too deeply for JSON");
  EXPECT_EQ(RenderError("{{ 'ab' * 100000000000 }}"),
            "chat template line 1: sequence repetition is too large");
  EXPECT_EQ(RenderError(
                "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"),
            "chat template line 1: the template runs too many loop iterations and macro calls");
  // A list grown by `+` copies itself each time: quadratic work no loop count sees.
  EXPECT_EQ(RenderError("{% set ns = namespace(l=[]) %}{% for i in range(20000) %}"
                        "{% set ns.l = ns.l + [i] %}{% endfor %}"),
            "chat template line 1: the template copies too much data (list or string "
            "concatenations)");
  EXPECT_EQ(RenderError("{% set ns = namespace(s='') %}{% for i in range(200000) %}"
                        "{% set ns.s = ns.s ~ 'abcdefgh' %}{% endfor %}"),
            "chat template line 1: the template copies too much data (list or string "
            "concatenations)");
  EXPECT_EQ(RenderText("{% set ns = namespace(l=[]) %}{% for i in range(8000) %}"
                       "{% set ns.l = ns.l + [i] %}{% endfor %}{{ ns.l | length }}",
                       nlohmann::ordered_json::object()),
            "8000");
  EXPECT_EQ(RenderError("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"),
            "chat template line 1: expression nested too deeply (found '(')");
  // A macro calling itself twice doubles its work each level (2^50 calls): calls count as steps.
  EXPECT_EQ(RenderError("{% macro f(x) %}{% if x < 50 %}{{ f(x + 1) }}{{ f(x + 1) }}{% endif %}"
                        "{% endmacro %}{{ f(0) }}"),
            "chat template line 1: the template runs too many loop iterations and macro calls");
  // A list of 200,000 kilobyte rows prints as 200 MB, in repr or JSON.
  const nlohmann::ordered_json rows = {
      {"rows", {{{"role", "user"}, {"content", std::string(1000, 'x')}}}}};
  EXPECT_EQ(RenderError("{{ rows * 200000 }}", rows),
            "chat template line 1: a value prints as more than 128 MiB of text");
  EXPECT_EQ(RenderError("{{ (rows * 200000) | tojson }}", rows),
            "chat template line 1: a value's JSON is more than 128 MiB of text");
  // 1 MB printed 100,000 times would need 100 GB.
  EXPECT_EQ(RenderError("{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{{ s }}"
                        "{% endfor %}"),
            "chat template line 1: the template writes more than 128 MiB of text");
  std::string nested;
  for (int i = 0; i < 5000; ++i) nested += "{% if true %}";
  EXPECT_EQ(RenderError(nested), "chat template line 1: blocks nested too deeply");
}

// Python's integers have no bound; the template's are 64-bit. Past the bound a named error,
// never a wrapped value, a crash (INT64_MIN // -1 traps) or a loop over a huge count.
TEST(EvaluatorLimitsTest, IntegerOverflowIsNamed) {
  const std::string min = "(-9223372036854775807 - 1)";
  EXPECT_EQ(RenderText("{{ 9223372036854775806 + 1 }} {{ " + min + " // 1 }} {{ " + min +
                       " % -1 }} {{ " + min + " % 3 }} {{ " + min +
                       " // 3 }} {{ 3 ** 39 }} {{ (-2) ** 63 }} {{ 1 ** 4611686018427387904 }} "
                       "{{ (-1) ** 4611686018427387905 }} {{ 0 ** 0 }} {{ 7 // -1 }}"),
            "9223372036854775807 -9223372036854775808 0 1 -3074457345618258603 4052555153018976267 "
            "-9223372036854775808 1 -1 1 -7");
  for (const std::string& expr : std::vector<std::string>{
           "9223372036854775807 + 1", min + " - 1", "4294967296 * 4294967296", min + " // -1",
           "2 ** 63", "3 ** 40", "2 ** 4611686018427387904", "-" + min}) {
    const std::string error = RenderError("{{ " + expr + " }}");
    EXPECT_NE(error.find("integer overflow in"), std::string::npos) << expr << ": " << error;
  }
  EXPECT_NE(RenderError("{{ " + min + " | abs }}").find("integer overflow in abs()"),
            std::string::npos);
  // An empty sequence repeated any number of times is empty, at once.
  EXPECT_EQ(RenderText("[{{ '' * 4611686018427387904 }}] {{ [] * 4611686018427387904 }}"), "[] []");
  // range() stops where its next value would pass 64 bits.
  EXPECT_EQ(RenderText("{{ range(0, 9223372036854775807, 4611686018427387904) | list }}"),
            "[0, 4611686018427387904]");
  // int of a float: NaN is the default (jinja2 catches Python's ValueError), infinity and
  // values past 64 bits are errors, the largest double below 2**63 converts.
  EXPECT_EQ(RenderText("{{ 'nan' | int(7) }} {{ 9.2e18 | int }} {{ '-9.2e18' | int }}"),
            "7 9200000000000000000 -9200000000000000000");
  for (const std::string value : {"1e308 * 10", "9.3e18", "'-1e19'", "'inf'"}) {
    EXPECT_NE(RenderError("{{ (" + value + ") | int }}").find("past 64-bit integers"),
              std::string::npos)
        << value;
  }
}

// indent and tojson repeat their indent on every line: a width past 1024 is refused by name, a
// negative one is no indent (Python's ' ' * -5).
TEST(EvaluatorLimitsTest, IndentsAreBounded) {
  EXPECT_EQ(RenderText("{{ 'a\nb' | indent(-5) }}|{{ 'a\nb' | indent(2) }}"), "a\nb|a\n  b");
  EXPECT_EQ(RenderError("{{ 'a' | indent(4611686018427387904) }}"),
            "chat template line 1: indent: an indent of more than 1024 characters");
  EXPECT_EQ(RenderError("{{ [1] | tojson(indent=1025) }}"),
            "chat template line 1: tojson: an indent of more than 1024 characters");
  EXPECT_EQ(RenderText("{{ [1] | tojson(indent=-1) }}"), "[\n1\n]");
}

}  // namespace
}  // namespace mkserve::chat::jinja
