#pragma once
// Errors the HTTP API returns, in the OpenAI shape:
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "max_tokens",
//              "code": null}}
// The message names the field and what was expected; `param` is the field's path
// ("messages[1].content") or null when no single field is at fault.

#include <nlohmann/json.hpp>
#include <string>

namespace dscale::server {

struct ApiError {
  int status = 400;  // HTTP status
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null

  nlohmann::json ToJson() const;
  // The JSON body, ready to send.
  std::string Body() const;
};

// 400 invalid_request_error about `param`; the message is "<param>: <what>".
ApiError BadField(const std::string& param, const std::string& what);
// 400 invalid_request_error from a message "<field>: <what>" (the engine's request check):
// `param` is the field where the message starts with a name and ": ", otherwise null.
ApiError BadFieldMessage(const std::string& message);
// 400 invalid_request_error from a schema's refusal "<path>: <what>" (JsonSchema::Compile, the
// path starting at the request field that holds the schema): `param` is the path.
ApiError SchemaRefusal(const std::string& message);
// 400 invalid_request_error with no single field at fault.
ApiError BadRequest(const std::string& message);
// 503 with a code ("overloaded", "shutting_down"); the handler adds Retry-After.
ApiError Unavailable(const std::string& code, const std::string& message);
// 500: the engine failed; the request did not complete.
ApiError InternalError(const std::string& message);

}  // namespace dscale::server
