#pragma once
// Reading the JSON of a request body written in another API's shape (the Responses and
// Messages APIs, translated into chat's): members, types, text parts, and the field map that
// names a translated field as the client sent it. Nothing here throws; each problem is an
// ApiError naming the field.

#include <array>
#include <cstddef>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/api_error.h"

namespace dscale::server {

// Where a chat body's fields came from in the body sent, as pairs of path prefixes
// ("messages[2].tool_calls[0].function" → "input[3]"): turns an error about the chat body into
// one about the request as sent.
class FieldMap {
 public:
  void Add(std::string chat_prefix, std::string sent_prefix);
  // The error with its param, and the message's leading "<param>: ", rewritten by the longest
  // prefix that matches whole path steps; an error about no field, or about a field that
  // matches none, is returned as it is.
  ApiError Translate(ApiError error) const;

 private:
  std::vector<std::pair<std::string, std::string>> prefixes_;
};

namespace request_json {

using Ordered = nlohmann::ordered_json;
using Error = std::optional<ApiError>;

// Whether `key` is one of `names`.
template <size_t N>
bool OneOf(const std::array<const char*, N>& names, std::string_view key) {
  for (const char* name : names) {
    if (key == name) return true;
  }
  return false;
}

// A body as sent: what CheckBodyBytes checks, then a JSON object with a "model".
Error ReadBody(std::string_view body, Ordered* out);
// ", got <a short description of value>".
std::string Got(const Ordered& value);
// A member that is there and not null, else null.
const Ordered* Member(const Ordered& object, const char* key);
// "name[i]".
std::string Index(const std::string& name, size_t i);
// An object's members other than `allowed` are errors naming them.
Error CheckMembers(const Ordered& v, const std::string& name,
                   std::initializer_list<std::string_view> allowed);
// Required and a string.
Error ExpectString(const Ordered* v, const std::string& name);
// One part {"type": one of `types`, "text"} ("refusal" parts carry "refusal" instead; besides,
// `extra` members are allowed) into *out.
Error ReadTextPart(const Ordered& p, const std::string& part,
                   std::initializer_list<std::string_view> types,
                   std::span<const std::string_view> extra, std::string* out);
// Text given as a string or as a list of such parts, joined as written.
Error ReadText(const Ordered& v, const std::string& name,
               std::initializer_list<std::string_view> types,
               std::span<const std::string_view> extra, std::string* out);

}  // namespace request_json
}  // namespace dscale::server
