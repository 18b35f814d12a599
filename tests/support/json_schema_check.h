#pragma once
// A JSON Schema validator for the keywords spec/json_schema.h compiles, written from the
// specification's meaning of each and independent of the compiler: what the grammar admits must
// validate here. Annotations and unknown keywords are ignored, as the specification says; the
// formats the compiler holds are asserted (json_format_check.h).

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "support/json_format_check.h"

namespace dscale::testing {

inline bool SchemaAdmits(const nlohmann::json& value, const nlohmann::json& schema,
                         const nlohmann::json& root) {
  using nlohmann::json;
  if (schema.is_boolean()) return schema.get<bool>();
  if (const auto ref = schema.find("$ref"); ref != schema.end()) {
    const std::string pointer = ref->get<std::string>().substr(1);
    return SchemaAdmits(value, root.at(json::json_pointer(pointer)), root);
  }
  if (const auto type = schema.find("type"); type != schema.end()) {
    const auto is = [&](const std::string& t) {
      if (t == "object") return value.is_object();
      if (t == "array") return value.is_array();
      if (t == "string") return value.is_string();
      if (t == "integer") return value.is_number_integer();
      if (t == "number") return value.is_number();
      if (t == "boolean") return value.is_boolean();
      return t == "null" && value.is_null();
    };
    bool any = false;
    if (type->is_string()) any = is(type->get<std::string>());
    for (const json& t : type->is_array() ? *type : json::array())
      any = any || is(t.get<std::string>());
    if (!any) return false;
  }
  if (const auto e = schema.find("enum"); e != schema.end()) {
    bool found = false;
    for (const json& v : *e) found = found || v == value;
    if (!found) return false;
  }
  if (const auto c = schema.find("const"); c != schema.end() && *c != value) return false;
  if (const auto any = schema.find("anyOf"); any != schema.end()) {
    bool ok = false;
    for (const json& s : *any) ok = ok || SchemaAdmits(value, s, root);
    if (!ok) return false;
  }
  if (const auto one = schema.find("oneOf"); one != schema.end()) {
    int matches = 0;
    for (const json& s : *one) matches += SchemaAdmits(value, s, root) ? 1 : 0;
    if (matches != 1) return false;
  }
  if (const auto all = schema.find("allOf"); all != schema.end()) {
    for (const json& s : *all) {
      if (!SchemaAdmits(value, s, root)) return false;
    }
  }
  if (value.is_number()) {
    const double x = value.get<double>();
    if (schema.contains("minimum") && x < schema["minimum"].get<double>()) return false;
    if (schema.contains("maximum") && x > schema["maximum"].get<double>()) return false;
    if (schema.contains("exclusiveMinimum") && x <= schema["exclusiveMinimum"].get<double>()) {
      return false;
    }
    if (schema.contains("exclusiveMaximum") && x >= schema["exclusiveMaximum"].get<double>()) {
      return false;
    }
  }
  if (value.is_string()) {
    // Lengths in code points: the UTF-8 bytes that begin one. A pattern matches anywhere in the
    // string (ECMA-262's search), here std::regex's ECMAScript grammar (ASCII strings only).
    const std::string& text = value.get_ref<const std::string&>();
    const auto length = static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
      return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    }));
    if (length < schema.value("minLength", size_t{0})) return false;
    if (length > schema.value("maxLength", length)) return false;
    if (const auto pattern = schema.find("pattern"); pattern != schema.end()) {
      if (!std::regex_search(text,
                             std::regex(pattern->get<std::string>(), std::regex::ECMAScript))) {
        return false;
      }
    }
    if (const auto format = schema.find("format"); format != schema.end()) {
      if (!FormatHolds(format->get<std::string>(), text)) return false;
    }
  }
  if (value.is_object()) {
    const json properties = schema.value("properties", json::object());
    for (const auto& [key, member] : value.items()) {
      if (properties.contains(key)) {
        if (!SchemaAdmits(member, properties[key], root)) return false;
      } else if (const auto extra = schema.find("additionalProperties"); extra != schema.end()) {
        if (!SchemaAdmits(member, *extra, root)) return false;
      }
    }
    for (const json& name : schema.value("required", json::array())) {
      if (!value.contains(name.get<std::string>())) return false;
    }
  }
  if (value.is_array()) {
    const json prefix = schema.value("prefixItems", json::array());
    for (size_t i = 0; i < value.size(); ++i) {
      if (i < prefix.size()) {
        if (!SchemaAdmits(value[i], prefix[i], root)) return false;
      } else if (const auto items = schema.find("items"); items != schema.end()) {
        if (!SchemaAdmits(value[i], *items, root)) return false;
      }
    }
    if (value.size() < schema.value("minItems", size_t{0})) return false;
    if (schema.value("uniqueItems", false)) {
      for (size_t i = 0; i < value.size(); ++i) {
        for (size_t j = 0; j < i; ++j) {
          if (value[i] == value[j]) return false;
        }
      }
    }
    if (value.size() > schema.value("maxItems", value.size())) return false;
  }
  return true;
}

inline bool SchemaAdmits(const nlohmann::json& value, const nlohmann::json& schema) {
  return SchemaAdmits(value, schema, schema);
}

}  // namespace dscale::testing
