// Python's str.isspace() for Jinja's strip/split and friends (templates are Python str: code
// points, decoded with common/utf8.h).
#pragma once

namespace mkserve::chat::jinja {

// Python str.isspace() for the code points templates meet (ASCII and common Unicode spaces).
bool IsSpace(char32_t code_point);

}  // namespace mkserve::chat::jinja
