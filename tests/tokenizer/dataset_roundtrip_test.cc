// Every prompt of the benchmark datasets (GSM8K test, MATH500, HumanEval, MBPP) encodes to
// the reference ids and decodes back to itself, in one piece and streamed token by token.

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "io/tokenizer/stream_decoder.h"
#include "io/tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace dscale {
namespace {

using testing::Qwen3Tokenizer;

struct Dataset {
  const char* name;
  const char* file;  // under data/, one JSON object per line
  const char* field;
  size_t prompts;
  // Over all prompts in file order, from an independent implementation of the reference
  // algorithm: the number of ids, and FNV-1a 64 over the ids as little-endian uint32.
  size_t total_ids;
  uint64_t ids_fnv1a;
};

constexpr Dataset kDatasets[] = {
    {"GSM8K", "gsm8k/test.jsonl", "question", 1319, 80865, 0x1b39d66ee6c4478full},
    {"MATH500", "math500/test.jsonl", "problem", 500, 35470, 0x4af4911d32a9fdbeull},
    {"HumanEval", "humaneval/HumanEval.jsonl", "prompt", 164, 21991, 0xfc19365e617e62baull},
    {"MBPP", "mbpp/mbpp.jsonl", "text", 974, 15703, 0x7bdf1985479a5aebull},
};

std::vector<std::string> ReadPrompts(const Dataset& dataset) {
  std::ifstream in(std::filesystem::path(DSCALE_DATA_DIR) / dataset.file);
  EXPECT_TRUE(in.good()) << dataset.file;
  std::vector<std::string> prompts;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
    EXPECT_TRUE(row.is_object() && row.contains(dataset.field) && row[dataset.field].is_string())
        << dataset.file << ": " << line.substr(0, 80);
    if (row.is_object() && row.contains(dataset.field) && row[dataset.field].is_string()) {
      prompts.push_back(row[dataset.field].get<std::string>());
    }
  }
  return prompts;
}

uint64_t Fnv1a(const std::vector<int32_t>& ids, uint64_t hash) {
  for (int32_t id : ids) {
    for (int shift = 0; shift < 32; shift += 8) {
      hash ^= (static_cast<uint32_t>(id) >> shift) & 0xFF;
      hash *= 0x100000001b3ull;
    }
  }
  return hash;
}

void PrintTo(const Dataset& dataset, std::ostream* os) { *os << dataset.name; }

// Streams `ids` through a StreamDecoder, checking that every piece is valid UTF-8.
std::string Stream(const std::vector<int32_t>& ids) {
  StreamDecoder decoder(Qwen3Tokenizer());
  std::string streamed;
  for (int32_t id : ids) {
    std::string piece;
    EXPECT_TRUE(decoder.Push(id, &piece).ok());
    EXPECT_EQ(utf8::FindInvalid(piece), utf8::kAllValid);
    streamed += piece;
  }
  decoder.Finish(&streamed);
  return streamed;
}

// One test per dataset rather than one per property: each test process loads the vocab.
class DatasetRoundTripTest : public ::testing::TestWithParam<Dataset> {};

TEST_P(DatasetRoundTripTest, ReferenceIdsAndExactRoundTrip) {
  const Dataset& dataset = GetParam();
  const std::vector<std::string> prompts = ReadPrompts(dataset);
  ASSERT_EQ(prompts.size(), dataset.prompts);
  size_t total = 0;
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Result<std::vector<int32_t>> ids = Qwen3Tokenizer().Encode(prompts[i]);
    ASSERT_TRUE(ids.ok()) << dataset.name << " #" << i << ": " << ids.status().ToString();
    Result<std::string> text = Qwen3Tokenizer().Decode(*ids);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    EXPECT_EQ(*text, prompts[i]) << dataset.name << " #" << i;
    EXPECT_EQ(Stream(*ids), prompts[i]) << dataset.name << " #" << i << ", streamed";
    total += ids->size();
    hash = Fnv1a(*ids, hash);
  }
  EXPECT_EQ(total, dataset.total_ids);
  EXPECT_EQ(hash, dataset.ids_fnv1a);
}

INSTANTIATE_TEST_SUITE_P(Datasets, DatasetRoundTripTest, ::testing::ValuesIn(kDatasets),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace dscale
