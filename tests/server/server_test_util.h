#pragma once
// Shared by the server's unit tests: the small tokenizer the server tests use (ids below 512,
// see tests/data/server_tokenizer) and a model description that matches it.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/tokenizer/tokenizer.h"
#include "server/prompt_builder.h"
#include "server/request_channel.h"

namespace dscale::server::testing {

inline const Tokenizer& ServerTokenizer() {
  static const Tokenizer* tokenizer = [] {
    Result<Tokenizer> t = Tokenizer::Load(std::string(DSCALE_TEST_DATA_DIR) + "/server_tokenizer");
    EXPECT_TRUE(t.ok()) << t.status().message();
    return new Tokenizer(std::move(t).value());
  }();
  return *tokenizer;
}

// A channel's updates, one per text, the last one ending the request with `outcome`.
inline std::vector<RequestChannel::Update> ChannelUpdates(const std::vector<std::string>& texts,
                                                          Outcome outcome) {
  std::vector<RequestChannel::Update> updates;
  for (const std::string& text : texts) updates.push_back({.text = text});
  updates.back().done = true;
  updates.back().outcome = outcome;
  return updates;
}

inline ModelInfo TinyModelInfo() {
  return {.name = "tiny",
          .context_length = 64,
          .max_request_tokens = 64,
          .default_max_tokens = 16,
          .stop_ids = {509},
          .chat_stop_ids = {509, 507}};
}

}  // namespace dscale::server::testing
