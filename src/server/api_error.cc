#include "server/api_error.h"

#include <algorithm>
#include <cctype>

namespace dscale::server {

nlohmann::json ApiError::ToJson() const {
  nlohmann::json error = {
      {"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) error["param"] = param;
  if (!code.empty()) error["code"] = code;
  return {{"error", std::move(error)}};
}

std::string ApiError::Body() const {
  // Messages may quote request text; replace rather than throw on anything ill-formed.
  return ToJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError BadField(const std::string& param, const std::string& what) {
  return {.status = 400, .message = param + ": " + what, .param = param};
}

ApiError BadFieldMessage(const std::string& message) {
  const size_t colon = message.find(": ");
  const bool named =
      colon != std::string::npos && colon > 0 &&
      std::all_of(message.begin(), message.begin() + static_cast<long>(colon),
                  [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  ApiError e = BadRequest(message);
  if (named) e.param = message.substr(0, colon);
  return e;
}

ApiError SchemaRefusal(const std::string& message) {
  const size_t colon = message.find(": ");
  if (colon == std::string::npos) return BadRequest(message);
  return BadField(message.substr(0, colon), message.substr(colon + 2));
}

ApiError BadRequest(const std::string& message) { return {.status = 400, .message = message}; }

ApiError Unavailable(const std::string& code, const std::string& message) {
  return {.status = 503, .message = message, .type = "server_error", .code = code};
}

ApiError InternalError(const std::string& message) {
  return {.status = 500, .message = message, .type = "server_error", .code = "internal_error"};
}

}  // namespace dscale::server
