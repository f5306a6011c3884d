// Filters, tests and methods, including those @huggingface/jinja lacks or implements
// differently (expected values are Python jinja2's).
#include <gtest/gtest.h>

#include "chat/jinja/render_helper.h"

namespace mkserve::chat::jinja {
namespace {

using Json = nlohmann::ordered_json;

Json People() {
  return Json::parse(
      R"({"people": [{"name": "bo", "age": 30, "tags": {"x": 1}}, {"name": "Al", "age": 25},
                                     {"name": "cy", "age": 35, "tags": {"x": 2}}]})");
}

TEST(FiltersTest, Sequences) {
  Json p = People();
  EXPECT_EQ(RenderText("{{ people | map(attribute='name') | join(',') }}", p), "bo,Al,cy");
  EXPECT_EQ(RenderText("{{ people | map(attribute='tags.x', default=0) | list }}", p), "[1, 0, 2]");
  // A part of only digits is an index (one past 64 bits is past any list); '1x' is a name.
  const Json rows = Json::parse(R"({"rows": [[5, 6], {"1x": 7, "9": 8}]})");
  EXPECT_EQ(RenderText("{{ rows | map(attribute='1', default=0) | list }} {{ rows | "
                       "map(attribute='99999999999999999999', default=0) | list }} {{ rows | "
                       "map(attribute='1x', default=0) | list }}",
                       rows),
            "[6, 0] [0, 0] [0, 7]");
  EXPECT_EQ(RenderText("{{ people | selectattr('tags') | map(attribute='name') | list }}", p),
            "['bo', 'cy']");
  EXPECT_EQ(
      RenderText("{{ people | rejectattr('age', 'gt', 28) | map(attribute='name') | first }}", p),
      "Al");
  EXPECT_EQ(RenderText("{{ people | sort(attribute='name') | map(attribute='name') | join }}", p),
            "Albocy");
  EXPECT_EQ(RenderText("{{ people | sum(attribute='age') }} {{ people | count }} {{ (people | "
                       "max(attribute='age')).name }}",
                       p),
            "90 3 cy");
  EXPECT_EQ(RenderText("{{ [3, 1, 2] | min }} {{ [3, 1, 2] | select('odd') | list }} {{ [3, 1, 2] "
                       "| reject('odd') | list }}"),
            "1 [3, 1] [2]");
  EXPECT_EQ(RenderText("{{ ['b', 'A', 'a', 'B'] | unique | list }} {{ ['b', 'A', 'a'] | "
                       "unique(case_sensitive=true) | list }}"),
            "['b', 'A'] ['b', 'A', 'a']");
  EXPECT_EQ(RenderText("{{ {'b': 1, 'A': 2, 'c': 0} | dictsort }} {{ {'b': 1, 'a': 2} | "
                       "dictsort(by='value', reverse=true) }}"),
            "[('A', 2), ('b', 1), ('c', 0)] [('a', 2), ('b', 1)]");
  EXPECT_EQ(RenderText("{{ [1, 2] | reverse | list }} {{ 'abc' | reverse }} {{ ['a', 'b'] | "
                       "map('upper') | join }}"),
            "[2, 1] cba AB");
  EXPECT_EQ(
      RenderText("{{ [] | first is defined }} {{ {'a': 1} | items | list }} {{ 'ab' | list }}"),
      "False [('a', 1)] ['a', 'b']");
}

TEST(FiltersTest, Strings) {
  EXPECT_EQ(RenderText("{{ '  x  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ 'hELLO wORLD' | "
                       "capitalize }}|{{ 'ünï 1st' | title }}|{{ 'ÉCOLE' | lower }}"),
            "x|hi|Hello world|Ünï 1St|école");
  EXPECT_EQ(RenderText("{{ '<a href=\"x\">&\\'' | escape }}"),
            "&lt;a href=&#34;x&#34;&gt;&amp;&#39;");
  EXPECT_EQ(RenderText("{{ 'one, two  three!' | wordcount }} {{ 'a-b-c' | replace('-', '+', 1) }} "
                       "{{ '%s=%d' | format('x', 3) }}"),
            "3 a+b-c x=3");
  EXPECT_EQ(RenderText("{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent('>', first=true) }}|{{ "
                       "'a\n\nb' | indent(1, blank=true) }}"),
            "a\n  b\n\n  c|>a\n>b|a\n \n b");
  EXPECT_EQ(RenderText("{{ '42' | int + 1 }} {{ '4.7' | int }} {{ 'x' | int(-1) }} {{ '2.5' | "
                       "float }} {{ 3 | float }} {{ -2.5 | abs }}"),
            "43 4 -1 2.5 3.0 2.5");
  // Python's round() sends ties to the even neighbour (checked against transformers' render).
  EXPECT_EQ(RenderText("{{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.1 | "
                       "round(method='ceil') }} "
                       "{{ 2.9 | round(0, 'floor') }}"),
            "2.57 2.0 4.0 3.0 2.0");
  EXPECT_EQ(RenderText("{{ 'straße' | upper }} {{ none | map(attribute='x') | list }} {{ none | "
                       "selectattr('x') | list }}"),
            "STRASSE [] []");
  EXPECT_EQ(RenderText("{{ none | string }} {{ true | string }} {{ 'x' | safe }} {{ missing | "
                       "default('d') }} {{ '' | d('e', true) }}"),
            "None True x d e");
  EXPECT_EQ(RenderError("{{ 1 | nosuchfilter }}"),
            "chat template line 1: unknown filter 'nosuchfilter'");
}

TEST(FiltersTest, Tests) {
  EXPECT_EQ(RenderText("{{ 1 is integer }}{{ 1.0 is float }}{{ true is number }}{{ true is integer "
                       "}}{{ 'a' is string }}"
                       "{{ {} is mapping }}{{ [] is sequence }}{{ 'x' is iterable }}{{ none is "
                       "none }}{{ true is true }}"
                       "{{ false is false }}{{ 0 is false }}{{ 3 is in [1, 3] }}{{ 4 is ne 4 }}{{ "
                       "'ab' is upper }}"
                       "{{ 9 is divisibleby 3 }}{{ range is callable }}{{ 'a' is eq('a') }}{{ 2 is "
                       "ge 2 }}{{ none is sameas none }}"),
            "TrueTrueTrueFalseTrueTrueTrueTrueTrueTrueTrueFalseTrueFalseFalseTrueTrueTrueTrueTrue");
  EXPECT_EQ(RenderError("{{ 1 is nosuchtest }}"),
            "chat template line 1: unknown test 'nosuchtest'");
}

TEST(FiltersTest, Methods) {
  EXPECT_EQ(RenderText("{{ ' a b '.strip() }}|{{ 'xax'.strip('x') }}|{{ 'a,b,c'.split(',', 1) "
                       "}}|{{ '  a  b '.split() }}|{{ 'ab'.upper() }}"),
            "a b|a|['a', 'b,c']|['a', 'b']|AB");
  EXPECT_EQ(RenderText("{{ 'hello'.startswith(('x', 'he')) }} {{ 'hello'.endswith('lo') }} {{ "
                       "'a{}c{x}'.format('b', x='d') }} {{ 'aXbX'.replace('X', '-') }}"),
            "True True abcd a-b-");
  EXPECT_EQ(RenderText("{{ 'héllo'.find('l') }} {{ 'banana'.count('an') }} {{ '-'.join(['a', 'b']) "
                       "}} {{ 'a\nb\n'.splitlines() }} {{ 'Hi there'.title() }}"),
            "2 2 a-b ['a', 'b'] Hi There");
  EXPECT_EQ(RenderText("{% set d = {'a': 1} %}{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 0) "
                       "}} {{ d.keys() | list }} {{ d.values() | list }} {{ d.items() | list }}"),
            "1 None 0 ['a'] [1] [('a', 1)]");
  EXPECT_EQ(RenderText("{% set l = [1] %}{% set _ = l.append(2) %}{{ l }} {{ l.pop() }} {{ l }} {{ "
                       "[5, 6].index(6) }}"),
            "[1, 2] 2 [1] 1");
}

TEST(FiltersTest, Globals) {
  EXPECT_EQ(RenderText("{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(3, 0, -1) | "
                       "list }} {{ dict(a=1) }}"),
            "[0, 1, 2] [1, 3, 5] [3, 2, 1] {'a': 1}");
  EXPECT_EQ(RenderError("{{ range(10000000) | length }}"),
            "chat template line 1: range() is too large");
}

}  // namespace
}  // namespace mkserve::chat::jinja
