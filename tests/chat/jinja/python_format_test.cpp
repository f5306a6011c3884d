#include "chat/jinja/python_format.h"

#include <gtest/gtest.h>

namespace mkserve::chat::jinja {
namespace {

TEST(PythonFormatTest, FloatReprMatchesPython) {
  EXPECT_EQ(FormatPythonFloat(1.0), "1.0");
  EXPECT_EQ(FormatPythonFloat(0.1), "0.1");
  EXPECT_EQ(FormatPythonFloat(-2.5), "-2.5");
  EXPECT_EQ(FormatPythonFloat(1e16), "1e+16");
  EXPECT_EQ(FormatPythonFloat(1e15), "1000000000000000.0");
  EXPECT_EQ(FormatPythonFloat(123456789.125), "123456789.125");
  EXPECT_EQ(FormatPythonFloat(0.0001), "0.0001");
  EXPECT_EQ(FormatPythonFloat(0.00001), "1e-05");
  EXPECT_EQ(FormatPythonFloat(1.5e-7), "1.5e-07");
  EXPECT_EQ(FormatPythonFloat(2.5e300), "2.5e+300");
  EXPECT_EQ(FormatPythonFloat(0.0), "0.0");
  EXPECT_EQ(FormatPythonFloat(1.0 / 3.0), "0.3333333333333333");
}

TEST(PythonFormatTest, StrAndRepr) {
  EXPECT_EQ(PythonStr(Value(true)), "True");
  EXPECT_EQ(PythonStr(Value(nullptr)), "None");
  EXPECT_EQ(PythonStr(Value()), "");
  EXPECT_EQ(PythonStr(Value("it's")), "it's");
  EXPECT_EQ(PythonRepr(Value("it's")), "\"it's\"");
  EXPECT_EQ(PythonRepr(Value("say \"hi\" it's")), "'say \"hi\" it\\'s'");
  EXPECT_EQ(PythonRepr(Value("a\nb\\")), "'a\\nb\\\\'");
  Value list(Array{Value(1), Value("x"), Value(2.0), Value(nullptr), Value(false)});
  EXPECT_EQ(PythonStr(list), "[1, 'x', 2.0, None, False]");
  Value dict = Value::FromJson(nlohmann::ordered_json::parse(R"({"b": [1], "a": {"c": "d"}})"));
  EXPECT_EQ(PythonStr(dict), "{'b': [1], 'a': {'c': 'd'}}");
}

}  // namespace
}  // namespace mkserve::chat::jinja
