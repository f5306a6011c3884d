// UTF-8 helpers: Jinja strings are Python str, so length, indexing and slicing count code
// points, not bytes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mkserve::chat::jinja {

// Code points of `text`; an invalid byte becomes one code point of its own value.
std::u32string DecodeUtf8(std::string_view text);
std::string EncodeUtf8(std::u32string_view code_points);
void AppendUtf8(char32_t code_point, std::string& out);
size_t CodePointCount(std::string_view text);
// Python str.isspace() for the code points templates meet (ASCII and common Unicode spaces).
bool IsSpace(char32_t code_point);

}  // namespace mkserve::chat::jinja
