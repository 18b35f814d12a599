#include "server/request_json.h"

#include <algorithm>

#include "io/json_util.h"
#include "server/openai_request.h"

namespace dscale::server {

void FieldMap::Add(std::string chat_prefix, std::string sent_prefix) {
  prefixes_.emplace_back(std::move(chat_prefix), std::move(sent_prefix));
}

ApiError FieldMap::Translate(ApiError error) const {
  const std::pair<std::string, std::string>* best = nullptr;
  for (const auto& entry : prefixes_) {
    const std::string& prefix = entry.first;
    const bool matches = error.param.starts_with(prefix) &&
                         (error.param.size() == prefix.size() ||
                          error.param[prefix.size()] == '.' || error.param[prefix.size()] == '[');
    if (matches && (best == nullptr || prefix.size() > best->first.size())) best = &entry;
  }
  if (best == nullptr) return error;
  const std::string param = best->second + error.param.substr(best->first.size());
  if (error.message.starts_with(error.param + ": ")) {
    error.message = param + error.message.substr(error.param.size());
  }
  error.param = param;
  return error;
}

namespace request_json {

Error ReadBody(std::string_view body, Ordered* out) {
  if (auto e = CheckBodyBytes(body)) return e;
  *out = Ordered::parse(body, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) return BadRequest("the request body is not valid JSON");
  if (!out->is_object()) return BadRequest("the request body must be a JSON object" + Got(*out));
  if (Member(*out, "model") == nullptr) return BadField("model", "is required");
  return std::nullopt;
}

std::string Got(const Ordered& value) { return ", got " + DescribeJson(nlohmann::json(value)); }

const Ordered* Member(const Ordered& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string Index(const std::string& name, size_t i) {
  return name + "[" + std::to_string(i) + "]";
}

Error CheckMembers(const Ordered& v, const std::string& name,
                   std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : v.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return BadField(name + "." + key, "unrecognized field");
    }
  }
  return std::nullopt;
}

Error ExpectString(const Ordered* v, const std::string& name) {
  if (v == nullptr) return BadField(name, "is required");
  if (!v->is_string()) return BadField(name, "expected a string" + Got(*v));
  return std::nullopt;
}

// One part {"type": one of `types`, "text"} ("refusal" parts carry "refusal" instead).
Error ReadTextPart(const Ordered& p, const std::string& part,
                   std::initializer_list<std::string_view> types,
                   std::span<const std::string_view> extra, std::string* out) {
  if (!p.is_object()) return BadField(part, "expected an object" + Got(p));
  const Ordered* type = Member(p, "type");
  const bool known = type != nullptr && type->is_string() &&
                     std::find(types.begin(), types.end(), type->get<std::string>()) != types.end();
  if (!known) {
    std::string expected;
    for (std::string_view t : types) {
      expected += (expected.empty() ? "\"" : ", \"") + std::string(t) + "\"";
    }
    return BadField(part + ".type", "expected " + expected + " (only text is supported)" +
                                        (type == nullptr ? "" : Got(*type)));
  }
  const char* text_key = *type == "refusal" ? "refusal" : "text";
  for (const auto& [key, value] : p.items()) {
    if (key != "type" && key != text_key &&
        std::find(extra.begin(), extra.end(), key) == extra.end()) {
      return BadField(part + "." + key, "unrecognized field");
    }
  }
  if (Error e = ExpectString(Member(p, text_key), part + "." + text_key)) return e;
  *out = Member(p, text_key)->get<std::string>();
  return std::nullopt;
}

// Text given as a string or as a list of parts (ReadTextPart), joined.
Error ReadText(const Ordered& v, const std::string& name,
               std::initializer_list<std::string_view> types,
               std::span<const std::string_view> extra, std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return std::nullopt;
  }
  if (!v.is_array()) return BadField(name, "expected a string or a list of text parts" + Got(v));
  out->clear();
  for (size_t j = 0; j < v.size(); ++j) {
    std::string text;
    if (Error e = ReadTextPart(v[j], Index(name, j), types, extra, &text)) return e;
    *out += text;
  }
  return std::nullopt;
}

}  // namespace request_json
}  // namespace dscale::server
