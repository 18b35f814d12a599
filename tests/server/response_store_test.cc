// The Responses API's store: a conversation is its chain of responses' items, oldest first;
// the least recently used responses go first past the byte bound; a dropped ancestor is named.

#include "server/response_store.h"

#include <gtest/gtest.h>

#include <string>

namespace dscale::server {
namespace {

ResponseJson Item(const std::string& text) { return {{"role", "user"}, {"content", text}}; }

ResponseJson ResponseWith(const std::string& id, const std::string& answer) {
  return {
      {"id", id},
      {"object", "response"},
      {"output",
       ResponseJson::array(
           {{{"type", "message"},
             {"role", "assistant"},
             {"content", ResponseJson::array({{{"type", "output_text"}, {"text", answer}}})}}})}};
}

std::vector<std::string> Texts(const ResponseJson& items) {
  std::vector<std::string> out;
  for (const ResponseJson& item : items) {
    out.push_back(item["content"].is_string() ? item["content"].get<std::string>()
                                              : item["content"][0]["text"].get<std::string>());
  }
  return out;
}

TEST(ResponseStoreTest, AConversationIsItsChainOfItems) {
  ResponseStore store(1 << 20);
  store.Put("r1", "", ResponseJson::array({Item("q1")}), ResponseWith("r1", "a1"));
  store.Put("r2", "r1", ResponseJson::array({Item("q2")}), ResponseWith("r2", "a2"));
  store.Put("r3", "r2", ResponseJson::array({Item("q3"), Item("q3b")}), ResponseWith("r3", "a3"));
  std::string missing;
  const std::optional<ResponseJson> conversation = store.Conversation("r3", &missing);
  ASSERT_TRUE(conversation.has_value());
  EXPECT_EQ(Texts(*conversation),
            (std::vector<std::string>{"q1", "a1", "q2", "a2", "q3", "q3b", "a3"}));
  EXPECT_EQ(Texts(*store.Conversation("r1", &missing)), (std::vector<std::string>{"q1", "a1"}));
  EXPECT_EQ((*store.Response("r2"))["id"], "r2");

  EXPECT_TRUE(store.Delete("r2"));
  EXPECT_FALSE(store.Delete("r2"));
  EXPECT_FALSE(store.Response("r2").has_value());
  EXPECT_FALSE(store.Conversation("r3", &missing).has_value());
  EXPECT_EQ(missing, "r2");  // the ancestor that is gone
  EXPECT_FALSE(store.Conversation("r9", &missing).has_value());
  EXPECT_EQ(missing, "r9");
}

TEST(ResponseStoreTest, TheLeastRecentlyUsedGoFirstPastTheBound) {
  const ResponseJson input = ResponseJson::array({Item(std::string(100, 'x'))});
  ResponseStore probe(1 << 20);
  probe.Put("r0", "", input, ResponseWith("r0", "a"));
  const size_t one = probe.bytes();
  ResponseStore store(3 * one);  // three entries of this size
  store.Put("r0", "", input, ResponseWith("r0", "a"));
  store.Put("r1", "", input, ResponseWith("r1", "a"));
  store.Put("r2", "", input, ResponseWith("r2", "a"));
  EXPECT_EQ(store.bytes(), 3 * one);
  ASSERT_TRUE(store.Response("r0").has_value());  // r0 used: r1 is now the least recent
  store.Put("r3", "", input, ResponseWith("r3", "a"));
  EXPECT_LE(store.bytes(), 3 * one);
  EXPECT_TRUE(store.Response("r0").has_value());
  EXPECT_FALSE(store.Response("r1").has_value());
  EXPECT_TRUE(store.Response("r2").has_value());
  EXPECT_TRUE(store.Response("r3").has_value());
  // One larger than the whole store is not kept, and drops nothing.
  store.Put("big", "", ResponseJson::array({Item(std::string(4 * one, 'y'))}),
            ResponseWith("big", "a"));
  EXPECT_FALSE(store.Response("big").has_value());
  EXPECT_TRUE(store.Response("r3").has_value());
}

}  // namespace
}  // namespace dscale::server
