#pragma once
// Feeding a text to a schema's grammar from its start (spec/json_grammar.h): whether the grammar
// takes it all, and whether the output may then end.

#include <string_view>

#include "spec/json_grammar.h"

namespace dscale::testing {

inline bool GrammarTakes(const JsonSchema& schema, std::string_view text) {
  JsonGrammar g(schema);
  return g.Feed(text);
}

inline bool GrammarCompletes(const JsonSchema& schema, std::string_view text) {
  JsonGrammar g(schema);
  return g.Feed(text) && g.complete();
}

}  // namespace dscale::testing
