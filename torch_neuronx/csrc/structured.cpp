// structured.cpp — the out-of-line pieces of structured.h.
#include "structured.h"

namespace torch_neuronx::structured {

SchemaName::SchemaName(const char* schema) {
  const std::string s(schema);
  const auto dot = s.find('.');
  name = "aten::" + s.substr(0, dot);
  overload = dot == std::string::npos ? "" : s.substr(dot + 1);
}

}  // namespace torch_neuronx::structured
