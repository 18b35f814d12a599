#pragma once
// CallSyntax::xml_parameters (json_schema.h): the tags a call written as Qwen3-Coder's XML is made
// of (Qwen3.5's and Qwen3.6's calls), derived from the call's compiled schema. JsonSchema::Calls
// adds them; JsonGrammar's kXml* states walk them.

#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"
#include "spec/json_schema.h"

namespace dscale {

// Fills `schema`'s xml_tags and xml_arguments for its call node `call`: one object or a tagged
// union of them, each a string const name and an arguments object. `paths[node]` says where the
// schema wrote each node: a refusal is InvalidArgument "<path>: <why>".
Status AddXmlCallTags(JsonSchema& schema, int32_t call, std::span<const std::string> paths);

}  // namespace dscale
