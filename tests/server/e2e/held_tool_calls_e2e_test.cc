// --hold-tool-calls end to end: under tool_choice "auto" the server holds a strict tool's calls
// by default (a strict tool's parameters the grammar cannot hold are a 400 naming them, before
// any engine work), every tool's with `all` (such parameters then held to any object instead),
// and none with `none`; the answers are served whatever the model writes.

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "server_process.h"

namespace dscale::e2e {
namespace held_tool_calls_e2e_test {

using namespace std::chrono_literals;

// A chat request with one tool whose parameters hold a keyword the grammar cannot hold.
nlohmann::json ToolRequest(bool strict) {
  return {{"model", "tiny"},
          {"max_tokens", 12},
          {"temperature", 0},
          {"messages", {{{"role", "user"}, {"content", "What is the weather?"}}}},
          {"tools",
           {{{"type", "function"},
             {"function",
              {{"name", "get_weather"},
               {"strict", strict},
               {"parameters",
                {{"type", "object"},
                 {"properties", {{"days", {{"type", "integer"}, {"multipleOf", 2}}}}}}}}}}}}};
}

httplib::Result PostChat(int port, const nlohmann::json& body) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120s);
  return client.Post("/v1/chat/completions", body.dump(), "application/json");
}

TEST(HeldToolCallsE2eTest, StrictByDefaultAllAndNoneByFlag) {
  {
    auto server = ServerProcess::Start({});
    const httplib::Result strict = PostChat(server->port(), ToolRequest(true));
    ASSERT_TRUE(strict);
    EXPECT_EQ(strict->status, 400) << strict->body;
    EXPECT_EQ(nlohmann::json::parse(strict->body)["error"]["param"],
              "tools[0].function.parameters.properties.days.multipleOf");
    const httplib::Result loose = PostChat(server->port(), ToolRequest(false));
    ASSERT_TRUE(loose);
    EXPECT_EQ(loose->status, 200) << loose->body;
  }
  for (const char* hold : {"all", "none"}) {
    auto server = ServerProcess::Start({"--hold-tool-calls", hold});
    for (const bool strict : {false, true}) {
      const httplib::Result res = PostChat(server->port(), ToolRequest(strict));
      ASSERT_TRUE(res);
      // A strict tool is refused unless nothing is held; one that is not strict is served.
      EXPECT_EQ(res->status, strict && std::string(hold) == "all" ? 400 : 200)
          << hold << " " << res->body;
    }
  }
}

}  // namespace held_tool_calls_e2e_test
}  // namespace dscale::e2e
