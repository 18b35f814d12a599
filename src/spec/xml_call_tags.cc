#include "spec/xml_call_tags.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace dscale {
namespace xml_call_tags {
namespace {

using Kind = JsonSchemaNode::Kind;

// A JSON string's text, decoded.
std::string Unquoted(const std::string& json) {
  return nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false).get<std::string>();
}

class Builder {
 public:
  Builder(JsonSchema& schema, std::vector<std::vector<std::string>>& tags,
          std::vector<int32_t>& arguments, std::span<const std::string> paths)
      : schema_(schema), tags_(tags), arguments_(arguments), paths_(paths) {}

  // The call's "<function=NAME>" per tag literal, its arguments objects' "<parameter=KEY>" per
  // property and "</function>", and their string enums' values.
  Status Call(int32_t call) {
    const JsonSchemaNode& c = schema_.node(call);
    // Per tag literal, its object.
    const std::vector<int32_t> owner =
        c.kind == Kind::kTagged ? c.tag_owner : std::vector<int32_t>{call};
    if (c.kind != Kind::kTagged && !(c.kind == Kind::kObject && c.properties.size() == 2)) {
      return Refuse(call, "must be an object of a name and arguments, or a tagged union of them");
    }
    const JsonSchemaNode& names = schema_.node(c.properties[0].node);
    if (names.kind != Kind::kLiterals) return Refuse(call, "must begin with a name's const");
    for (size_t i = 0; i < names.literals.size(); ++i) {
      const JsonSchemaNode& object = schema_.node(owner[i]);
      if (object.properties.size() != 2 || names.literals[i].size() < 2 ||
          names.literals[i][0] != '"') {
        return Refuse(owner[i], "must be a string name and an arguments object");
      }
      const std::string name = Unquoted(names.literals[i]);
      if (name.empty() || name.find('>') != std::string::npos) {
        return Refuse(owner[i], "must have a name without \">\"");
      }
      tags_[call].push_back("<function=" + name + ">");
      DSCALE_RETURN_IF_ERROR(Arguments(object.properties[1].node));
    }
    return Status::Ok();
  }

 private:
  Status Arguments(int32_t arguments) {
    const JsonSchemaNode& a = schema_.node(arguments);
    if (a.kind != Kind::kObject) return Refuse(arguments, "must have an object of arguments");
    arguments_.push_back(a.properties.empty() ? -1 : arguments);
    if (a.properties.empty() || !tags_[arguments].empty()) return Status::Ok();
    if (a.properties.size() >= kMaxSchemaChoices) {  // and "</function>"
      return Refuse(arguments,
                    "takes fewer than " + std::to_string(kMaxSchemaChoices) + " properties");
    }
    for (const JsonSchemaNode::Property& p : a.properties) {
      const std::string key = Unquoted(p.key);
      if (key.empty() || key.find_first_of("> \t\n\r") != std::string::npos) {
        return Refuse(p.node, "must have names without \">\" or whitespace");
      }
      tags_[arguments].push_back("<parameter=" + key + ">");
      DSCALE_RETURN_IF_ERROR(Value(p.node));
    }
    tags_[arguments].push_back("</function>");
    return Status::Ok();
  }

  // An argument's: a string held to a length or pattern refused (its text is not held); an enum
  // of strings (and null, which the parser reads from "null") one tag per literal.
  Status Value(int32_t node) {
    const JsonSchemaNode& v = schema_.node(node);
    const auto held = [&](int32_t n) { return schema_.node(n).held_string(); };
    if (v.held_string() || std::any_of(v.alternatives.begin(), v.alternatives.end(), held)) {
      return Refuse(node, "an argument written as its text cannot be held to a length or pattern");
    }
    const auto text = [](const std::string& l) { return l[0] == '"' || l == "null"; };
    const bool texts = std::all_of(v.literals.begin(), v.literals.end(), text);
    if (v.kind != Kind::kLiterals || !texts || !tags_[node].empty()) return Status::Ok();
    const bool null = std::count(v.literals.begin(), v.literals.end(), "null") > 0;
    for (const std::string& l : v.literals) {
      const std::string value = l == "null" ? l : Unquoted(l);
      if (value.find("</parameter>") != std::string::npos || (null && l == "\"null\"")) {
        return Refuse(node, "an argument written as its text cannot take the value " + l +
                                (null ? " beside null" : ""));
      }
      tags_[node].push_back("\n" + value + "\n</parameter>");
    }
    return Status::Ok();
  }

  Status Refuse(int32_t node, const std::string& why) const {
    return InvalidArgument(paths_[static_cast<size_t>(node)] +
                           ": a call written as XML parameters " + why);
  }

  const JsonSchema& schema_;
  std::vector<std::vector<std::string>>& tags_;
  std::vector<int32_t>& arguments_;
  std::span<const std::string> paths_;
};

}  // namespace
}  // namespace xml_call_tags

Status AddXmlCallTags(JsonSchema& schema, int32_t call, std::span<const std::string> paths) {
  schema.xml_tags_.assign(schema.nodes_.size(), {});
  return xml_call_tags::Builder(schema, schema.xml_tags_, schema.xml_arguments_, paths).Call(call);
}

bool JsonSchema::xml_text(int32_t node) const {
  const JsonSchemaNode& n = nodes_[static_cast<size_t>(node)];
  if (n.kind == JsonSchemaNode::Kind::kString) return !n.held_string();
  if (n.kind != JsonSchemaNode::Kind::kUnion || n.alternatives.size() != 2) return false;
  bool string = false, null = false;
  for (const int32_t a : n.alternatives) {
    const JsonSchemaNode& alternative = nodes_[static_cast<size_t>(a)];
    string |= alternative.kind == JsonSchemaNode::Kind::kString && !alternative.held_string();
    null |= alternative.kind == JsonSchemaNode::Kind::kLiterals &&
            alternative.literals == std::vector<std::string>{"null"};
  }
  return string && null;
}

const std::vector<std::string>& JsonSchema::xml_tags(int32_t node) const {
  static const std::vector<std::string> none;
  return static_cast<size_t>(node) < xml_tags_.size() ? xml_tags_[static_cast<size_t>(node)] : none;
}

}  // namespace dscale
