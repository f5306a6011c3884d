#include "chat/jinja/python_space.h"

namespace mkserve::chat::jinja {

bool IsSpace(char32_t cp) {
  if (cp == ' ' || (cp >= '\t' && cp <= '\r') || (cp >= 0x1C && cp <= 0x1F)) return true;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

}  // namespace mkserve::chat::jinja
