// Loading both file layouts, their agreement, and the errors for missing or corrupt files.

#include "io/tokenizer/bpe_vocab.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "io/tokenizer/bpe.h"
#include "io/tokenizer/byte_level.h"
#include "io/tokenizer/pretokenizer.h"
#include "tokenizer_test_util.h"

namespace dscale {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::EncodeOrDie;

// A fresh folder under the system temp dir, removed with its contents at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "dscale_tokenizer_XXXXXX").string();
    DSCALE_CHECK(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  void Write(const std::string& name, const std::string& content) const {
    std::ofstream(path_ / name, std::ios::binary) << content;
  }

 private:
  fs::path path_;
};

std::string Spell(std::string_view bytes) {
  std::string out;
  byte_level::AppendEncoded(bytes, &out);
  return out;
}

// A tiny byte-level vocab: ids 0..255 are the bytes, then a few merges.
json SmallVocab() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[Spell(std::string(1, static_cast<char>(b)))] = b;
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab["hello"] = 259;
  vocab[Spell(" w")] = 260;
  return vocab;
}
const std::vector<std::pair<std::string, std::string>> kSmallMerges = {
    {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {Spell(" "), "w"}};
const std::vector<int32_t> kHelloWorldIds = {259, 260, 'o', 'r', 'l', 'd'};

std::string MergesTxt() {
  std::string out = "#version: 0.2\n";
  for (const auto& [l, r] : kSmallMerges) out += l + " " + r + "\n";
  return out;
}

json PreTokenizerJson() {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern", {{"Regex", std::string(kQwen2SplitPattern)}}},
             {"behavior", "Isolated"},
             {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
}

json TokenizerJson(const json& vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges,
                   bool merges_as_pairs, const std::vector<AddedToken>& added) {
  json merge_list = json::array();
  for (const auto& [l, r] : merges) {
    merge_list.push_back(merges_as_pairs ? json::array({l, r}) : json(l + " " + r));
  }
  json added_list = json::array();
  for (const AddedToken& t : added) {
    added_list.push_back({{"id", t.id},
                          {"content", t.content},
                          {"special", t.special},
                          {"lstrip", false},
                          {"rstrip", false},
                          {"single_word", false},
                          {"normalized", false}});
  }
  return {{"version", "1.0"},
          {"added_tokens", added_list},
          {"normalizer", {{"type", "NFC"}}},
          {"pre_tokenizer", PreTokenizerJson()},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model",
           {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}, {"ignore_merges", false}}}};
}

Result<std::vector<int32_t>> EncodeWith(const fs::path& dir, std::string_view text) {
  DSCALE_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::Load(dir));
  return tokenizer.Encode(text);
}

TEST(BpeVocabTest, BothLayoutsOfASmallVocabAgree) {
  TempDir files, json_pairs, json_strings;
  files.Write("vocab.json", SmallVocab().dump());
  files.Write("merges.txt", MergesTxt());
  json_pairs.Write("tokenizer.json", TokenizerJson(SmallVocab(), kSmallMerges, true, {}).dump());
  json_strings.Write("tokenizer.json", TokenizerJson(SmallVocab(), kSmallMerges, false, {}).dump());
  for (const TempDir* dir : {&files, &json_pairs, &json_strings}) {
    Result<std::vector<int32_t>> ids = EncodeWith(dir->path(), "hello world");
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    EXPECT_EQ(*ids, kHelloWorldIds) << dir->path();
  }
}

TEST(BpeVocabTest, IgnoreMergesEmitsWholeVocabEntries) {
  json vocab = SmallVocab();
  vocab["world"] = 261;  // no merges lead there
  json doc = TokenizerJson(vocab, kSmallMerges, true, {});
  TempDir plain, ignoring;
  plain.Write("tokenizer.json", doc.dump());
  doc["model"]["ignore_merges"] = true;
  ignoring.Write("tokenizer.json", doc.dump());
  EXPECT_EQ(*EncodeWith(plain.path(), "world"), (std::vector<int32_t>{'w', 'o', 'r', 'l', 'd'}));
  EXPECT_EQ(*EncodeWith(ignoring.path(), "world"), std::vector<int32_t>{261});
}

// The Qwen3 files rewritten as one tokenizer.json must tokenize identically.
TEST(BpeVocabTest, Qwen3AsTokenizerJsonGivesTheSameIds) {
  Result<BpeVocab> vocab = LoadBpeVocab(testing::kQwen3TokenizerDir);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  EXPECT_EQ(vocab->vocab.size(), 151643u);
  EXPECT_EQ(vocab->merges.size(), 151387u);
  EXPECT_EQ(vocab->added_tokens.size(), 26u);
  json vocab_json = json::object();
  for (const auto& [token, id] : vocab->vocab) vocab_json[token] = id;
  TempDir dir;
  dir.Write("tokenizer.json",
            TokenizerJson(vocab_json, vocab->merges, false, vocab->added_tokens).dump());
  Result<Tokenizer> from_json = Tokenizer::Load(dir.path());
  ASSERT_TRUE(from_json.ok()) << from_json.status().ToString();
  Result<Tokenizer> from_files = Tokenizer::FromVocab(*vocab);
  ASSERT_TRUE(from_files.ok());
  const Tokenizer& reference = *from_files;
  const std::string texts[] = {"Hello world",
                               "<|im_start|>user\nWhat's 12*34?<|im_end|>\n<think>\n\n</think>",
                               "def add(a, b):\r\n\treturn a + b  # \u4e2d\u6587 \U0001F600",
                               "cafe\u0301 \u00e9t\u00e9 \u3000 x\u00a0y \U0001FAE0 1,234.56"};
  for (const std::string& text : texts) {
    EXPECT_EQ(EncodeOrDie(*from_json, text), EncodeOrDie(reference, text)) << text;
  }
  for (int32_t id = 151643; id < 151669; ++id) {
    EXPECT_EQ(from_json->IsSpecial(id), reference.IsSpecial(id)) << id;
  }
}

// Compares the two merge algorithms on every pre-tokenized piece of some real text, and on
// long synthetic pieces.
TEST(BpeVocabTest, ScanAndHeapMergesAgree) {
  Result<BpeVocab> vocab = LoadBpeVocab(testing::kQwen3TokenizerDir);
  ASSERT_TRUE(vocab.ok());
  Result<std::unique_ptr<BpeModel>> bpe = BpeModel::Create(*vocab);
  ASSERT_TRUE(bpe.ok());
  Result<PreTokenizer> pre = PreTokenizer::CreateQwen2();
  ASSERT_TRUE(pre.ok());
  std::ifstream in(fs::path(DSCALE_DATA_DIR) / "humaneval" / "HumanEval.jsonl");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string_view> pieces;
  ASSERT_TRUE(pre->Split(text, &pieces).ok());
  size_t compared = 0;
  for (std::string_view piece : pieces) {
    if (piece.size() > BpeModel::kScanMaxBytes) continue;
    std::vector<int32_t> scan, heap, cached;
    (*bpe)->EncodePieceUncached(piece, BpeModel::Algorithm::kScan, &scan);
    (*bpe)->EncodePieceUncached(piece, BpeModel::Algorithm::kHeap, &heap);
    (*bpe)->EncodePiece(piece, &cached);
    ASSERT_EQ(scan, heap) << piece;
    ASSERT_EQ(cached, heap) << piece;
    ++compared;
  }
  EXPECT_GT(compared, 10000u);
  // Long pieces: the heap result must still be a tiling of the input.
  const std::string long_word = std::string(1000, 'a') + "bracadabra";
  std::vector<int32_t> ids;
  (*bpe)->EncodePieceUncached(long_word, BpeModel::Algorithm::kHeap, &ids);
  std::vector<const std::string*> spelled_by_id(vocab->vocab.size());
  for (const auto& [token, id] : vocab->vocab) spelled_by_id[id] = &token;
  std::string joined;
  for (int32_t id : ids) ASSERT_TRUE(byte_level::AppendDecoded(*spelled_by_id[id], &joined));
  EXPECT_EQ(joined, long_word);
  EXPECT_LT(ids.size(), long_word.size() / 2);
}

// ---- errors: each names the file (and field or line) and has the right code ----

void ExpectLoadError(const fs::path& dir, StatusCode code, const std::string& fragment) {
  Result<Tokenizer> tokenizer = Tokenizer::Load(dir);
  ASSERT_FALSE(tokenizer.ok()) << "expected an error containing: " << fragment;
  EXPECT_EQ(tokenizer.status().code(), code) << tokenizer.status().ToString();
  EXPECT_NE(tokenizer.status().message().find(fragment), std::string::npos)
      << tokenizer.status().message();
}

TEST(BpeVocabTest, MissingFiles) {
  TempDir dir;
  ExpectLoadError(dir.path() / "nope", StatusCode::kNotFound, "no such directory");
  ExpectLoadError(dir.path(), StatusCode::kNotFound, "neither tokenizer.json nor vocab.json");
  dir.Write("vocab.json", SmallVocab().dump());
  ExpectLoadError(dir.path(), StatusCode::kNotFound, "merges.txt: no such file");
}

// A tokenizer file that is a FIFO or a device is refused before anything reads it (neither
// hangs nor grows without bound).
TEST(BpeVocabTest, FilesThatAreNotRegularAreRefused) {
  TempDir fifo, device;
  ASSERT_EQ(::mkfifo((fifo.path() / "vocab.json").c_str(), 0600), 0);
  fifo.Write("merges.txt", "");
  ExpectLoadError(fifo.path(), StatusCode::kIoError, "vocab.json: not a regular file");
  device.Write("vocab.json", SmallVocab().dump());
  fs::create_symlink("/dev/zero", device.path() / "merges.txt");
  ExpectLoadError(device.path(), StatusCode::kIoError, "merges.txt: not a regular file");
}

TEST(BpeVocabTest, CorruptVocabJson) {
  const std::pair<std::string, std::string> cases[] = {
      {"{\"a\": 1", "vocab.json: not valid JSON"},
      {"[1, 2]", "vocab.json: expected an object of token -> id"},
      {"{\"a\": \"x\"}", "vocab.json: token \"a\": expected a token id"},
      {"{\"a\": -1}", "vocab.json: token \"a\": expected a token id"},
      {"{\"a\": 1.5}", "vocab.json: token \"a\": expected a token id"},
      {"{\"a\": {\"b\": 1}}", "vocab.json: expected an object of token -> id"},
  };
  for (const auto& [content, fragment] : cases) {
    TempDir dir;
    dir.Write("vocab.json", content);
    dir.Write("merges.txt", "");
    ExpectLoadError(dir.path(), StatusCode::kDataLoss, fragment);
  }
}

// Ids are checked as the JSON numbers they are, whichever file holds them: nothing past the id
// limit wraps into range.
TEST(BpeVocabTest, IdsPastTheirRangeAreNeverWrapped) {
  for (const std::string raw :
       {"4294967297", "2147483648", "18446744073709551615", "18446744073709551617", "16777216",
        "97.0", "true", "null", "[97]"}) {
    TempDir vocab_json, added_json, tokenizer_json;
    vocab_json.Write("vocab.json", R"({"a": )" + raw + "}");
    vocab_json.Write("merges.txt", "");
    ExpectLoadError(vocab_json.path(), StatusCode::kDataLoss,
                    "vocab.json: token \"a\": expected a token id");
    added_json.Write("vocab.json", SmallVocab().dump());
    added_json.Write("merges.txt", MergesTxt());
    added_json.Write("added_tokens.json", R"({"<x>": )" + raw + "}");
    ExpectLoadError(added_json.path(), StatusCode::kDataLoss,
                    "added_tokens.json: token \"<x>\": expected a token id");
    json doc = TokenizerJson(SmallVocab(), kSmallMerges, true, {{"<x>", 300, true}});
    doc["added_tokens"][0]["id"] = "@raw@";
    std::string text = doc.dump();
    text.replace(text.find("\"@raw@\""), 7, raw);
    tokenizer_json.Write("tokenizer.json", text);
    ExpectLoadError(tokenizer_json.path(), StatusCode::kDataLoss, "added_tokens[0].id: expected");
  }
}

// A key named twice in a tokenizer file is refused, not resolved silently to one of its values.
TEST(BpeVocabTest, RepeatedKeysAreRefused) {
  TempDir vocab_json, tokenizer_json, config_json;
  std::string vocab = SmallVocab().dump();
  vocab.insert(1, "\"he\": 300, ");  // "he" is 256 later in the object
  vocab_json.Write("vocab.json", vocab);
  vocab_json.Write("merges.txt", MergesTxt());
  ExpectLoadError(vocab_json.path(), StatusCode::kDataLoss, "token \"he\" is listed twice");

  // model.vocab is read entry by entry (never into an object), so its repeat is found where
  // vocab.json's is; a key repeated anywhere else is named with its place.
  std::string doc = TokenizerJson(SmallVocab(), kSmallMerges, true, {}).dump();
  doc.insert(doc.find("\"vocab\":{") + 9, "\"he\":300,");
  tokenizer_json.Write("tokenizer.json", doc);
  ExpectLoadError(tokenizer_json.path(), StatusCode::kDataLoss,
                  "tokenizer.json: model.vocab: token \"he\" is listed twice");
  for (const auto& [at, key, where] :
       {std::tuple{"\"model\":{", "\"type\":\"BPE\",", " in \"model\""},
        std::tuple{"{", "\"version\":\"2\",", ""},
        std::tuple{"\"normalizer\":{", "\"type\":\"NFC\",", " in \"normalizer\""}}) {
    doc = TokenizerJson(SmallVocab(), kSmallMerges, true, {}).dump();
    doc.insert(doc.find(at) + std::string_view(at).size(), key);
    tokenizer_json.Write("tokenizer.json", doc);
    const std::string name = std::string(key).substr(0, std::string(key).find(':'));
    ExpectLoadError(tokenizer_json.path(), StatusCode::kDataLoss,
                    "tokenizer.json: duplicate key " + name + where);
  }

  config_json.Write("vocab.json", SmallVocab().dump());
  config_json.Write("merges.txt", MergesTxt());
  config_json.Write("tokenizer_config.json", R"({"eos_token": "<a>", "eos_token": "<b>"})");
  ExpectLoadError(config_json.path(), StatusCode::kDataLoss,
                  "tokenizer_config.json: duplicate key \"eos_token\"");
}

// A tokenizer meant for a model must not hold ids the model's vocabulary lacks: the check names
// the file and the token.
TEST(BpeVocabTest, IdsOutsideTheModelsVocabularyAreNamed) {
  TempDir plain, added, json_layout;
  plain.Write("vocab.json", SmallVocab().dump());
  plain.Write("merges.txt", MergesTxt());
  const Tokenizer small = Tokenizer::Load(plain.path()).value();
  EXPECT_TRUE(small.CheckFitsVocabulary(261).ok());
  EXPECT_TRUE(small.CheckFitsVocabulary(151936).ok());
  const Status vocab_past = small.CheckFitsVocabulary(260);
  EXPECT_EQ(vocab_past.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(vocab_past.message().find("vocab.json: token \" w\" has id 260, outside the model's "
                                      "vocabulary of 260 ids"),
            std::string::npos)
      << vocab_past.message();

  added.Write("vocab.json", SmallVocab().dump());
  added.Write("merges.txt", MergesTxt());
  added.Write("added_tokens.json", R"({"<|im_end|>": 400})");
  const Tokenizer with_added = Tokenizer::Load(added.path()).value();
  EXPECT_TRUE(with_added.CheckFitsVocabulary(401).ok());
  const Status added_past = with_added.CheckFitsVocabulary(300);
  EXPECT_NE(added_past.message().find("added_tokens.json: token \"<|im_end|>\" has id 400"),
            std::string::npos)
      << added_past.message();

  json_layout.Write("tokenizer.json",
                    TokenizerJson(SmallVocab(), kSmallMerges, true, {{"<s>", 261, true}}).dump());
  const Tokenizer from_json = Tokenizer::Load(json_layout.path()).value();
  const Status json_past = from_json.CheckFitsVocabulary(261);
  EXPECT_NE(json_past.message().find("tokenizer.json: added_tokens: token \"<s>\" has id 261"),
            std::string::npos)
      << json_past.message();
}

TEST(BpeVocabTest, InconsistentVocabOrMerges) {
  TempDir bad_line, unknown, missing_byte, alien, duplicate;
  for (const TempDir* d : {&bad_line, &unknown}) d->Write("vocab.json", SmallVocab().dump());
  bad_line.Write("merges.txt", "#version: 0.2\nh e\nl l l\n");
  ExpectLoadError(bad_line.path(), StatusCode::kDataLoss, "merges.txt line 3: expected two tokens");
  unknown.Write("merges.txt", "h e\nx y\n");
  ExpectLoadError(unknown.path(), StatusCode::kDataLoss, "\"xy\" is not in the vocab");

  json vocab = SmallVocab();
  vocab.erase(Spell("\n"));
  missing_byte.Write("vocab.json", vocab.dump());
  missing_byte.Write("merges.txt", "");
  ExpectLoadError(missing_byte.path(), StatusCode::kDataLoss, "no token for byte 10");

  vocab = SmallVocab();
  vocab["\u4e2d"] = 300;
  alien.Write("vocab.json", vocab.dump());
  alien.Write("merges.txt", "");
  ExpectLoadError(alien.path(), StatusCode::kDataLoss, "outside the byte-level alphabet");

  vocab = SmallVocab();
  vocab["he"] = 5;
  duplicate.Write("vocab.json", vocab.dump());
  duplicate.Write("merges.txt", "");
  ExpectLoadError(duplicate.path(), StatusCode::kDataLoss, "id 5 is given to more than one token");
}

TEST(BpeVocabTest, AddedTokenFiles) {
  TempDir conflict, flags;
  for (const TempDir* d : {&conflict, &flags}) {
    d->Write("vocab.json", SmallVocab().dump());
    d->Write("merges.txt", MergesTxt());
  }
  conflict.Write("added_tokens.json", R"({"<a>": 300})");
  conflict.Write("tokenizer_config.json",
                 R"({"added_tokens_decoder": {"300": {"content": "<b>", "special": true}}})");
  ExpectLoadError(conflict.path(), StatusCode::kDataLoss, "which tokenizer_config.json gives to");
  flags.Write("tokenizer_config.json",
              R"({"added_tokens_decoder": {"300": {"content": "<b>", "lstrip": true}}})");
  ExpectLoadError(flags.path(), StatusCode::kInvalidArgument, "lstrip: true is not supported");
}

// Llama 3's split pattern: Qwen2's but for numbers, which split in runs of up to three digits.
constexpr std::string_view kLlama3SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// tokenizer.json's Split pattern is the one used: under Llama 3's, "12345" is the pieces "123"
// and "45", so the merge 2+3 applies; under Qwen2's every digit is its own piece.
TEST(BpeVocabTest, TheSplitPatternComesFromTokenizerJson) {
  Result<PreTokenizer> pre = PreTokenizer::Create(kLlama3SplitPattern);
  ASSERT_TRUE(pre.ok()) << pre.status().ToString();
  std::vector<std::string_view> pieces;
  ASSERT_TRUE(pre->Split("x 12345, 6", &pieces).ok());
  EXPECT_EQ(pieces, (std::vector<std::string_view>{"x", " ", "123", "45", ",", " ", "6"}));

  json vocab = SmallVocab();
  vocab["23"] = 261;
  std::vector<std::pair<std::string, std::string>> merges = kSmallMerges;
  merges.emplace_back("2", "3");
  json doc = TokenizerJson(vocab, merges, true, {});
  TempDir qwen, llama;
  qwen.Write("tokenizer.json", doc.dump());
  doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = std::string(kLlama3SplitPattern);
  llama.Write("tokenizer.json", doc.dump());
  Result<std::vector<int32_t>> by_qwen = EncodeWith(qwen.path(), "12345");
  Result<std::vector<int32_t>> by_llama = EncodeWith(llama.path(), "12345");
  ASSERT_TRUE(by_qwen.ok() && by_llama.ok());
  EXPECT_EQ(*by_qwen, (std::vector<int32_t>{'1', '2', '3', '4', '5'}));
  EXPECT_EQ(*by_llama, (std::vector<int32_t>{'1', 261, '4', '5'}));
}

// Qwen3.5's split pattern (its 248k tokenizer.json; Qwen3.6's is the same): Qwen2's with
// combining marks (\p{M}) in the letter runs and out of the symbol runs, so a letter keeps its
// marks. "नमस्ते" is न म स ् त े: under Qwen2's pattern the virama and the vowel sign cut the
// word into letter runs and mark runs; under Qwen3.5's it is one piece.
constexpr std::string_view kQwen3_5SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N})"
    R"(| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

TEST(BpeVocabTest, Qwen3_5sSplitPatternKeepsCombiningMarksWithTheirLetters) {
  const std::string word = "\u0928\u092e\u0938\u094d\u0924\u0947";  // नमस्ते
  const std::string spaced_word = " " + word;
  const std::string text = "say" + spaced_word + " 42";
  auto split = [&](std::string_view pattern) {
    Result<PreTokenizer> pre = PreTokenizer::Create(pattern);
    EXPECT_TRUE(pre.ok()) << pre.status().ToString();
    std::vector<std::string> pieces;
    std::vector<std::string_view> views;
    if (pre.ok() && pre->Split(text, &views).ok()) pieces.assign(views.begin(), views.end());
    return pieces;
  };
  EXPECT_EQ(split(kQwen3_5SplitPattern),
            (std::vector<std::string>{"say", spaced_word, " ", "4", "2"}));
  // Qwen2's: " नमस", then the virama opens "्त" (a non-letter prefix before a letter run), and
  // the vowel sign is a symbol run of its own.
  EXPECT_EQ(split(kQwen2SplitPattern),
            (std::vector<std::string>{"say", " \u0928\u092e\u0938", "\u094d\u0924", "\u0947", " ",
                                      "4", "2"}));
}

// model.vocab and model.merges are checked entry by entry as the file is read: every kind of bad
// entry, at the start, in the middle and at the end, is named, and the rest of the file after it
// is still read without harm.
TEST(BpeVocabTest, BadStreamedEntriesAreNamed) {
  const std::string good = TokenizerJson(SmallVocab(), kSmallMerges, false, {}).dump();
  const size_t vocab_at = good.find("\"vocab\":{") + 9;
  for (const std::string raw : {"-1", "97.5", "\"a\"", "null", "[97]", "{\"id\": 97}", "[[]]"}) {
    for (const bool at_end : {false, true}) {
      std::string doc = good;
      const std::string entry = "\"zz\":" + raw;
      if (at_end) {
        doc.insert(doc.find("}},\"normalizer\""), "," + entry);  // vocab is model's last key
      } else {
        doc.insert(vocab_at, entry + ",");
      }
      TempDir dir;
      dir.Write("tokenizer.json", doc);
      ExpectLoadError(dir.path(), StatusCode::kDataLoss,
                      "tokenizer.json: model.vocab: token \"zz\": expected a token id");
    }
  }
  const std::string pairs = TokenizerJson(SmallVocab(), kSmallMerges, true, {}).dump();
  const size_t merges_at = pairs.find("\"merges\":[") + 10;
  for (const std::string raw :
       {"5", "\"h\"", "\"h e l\"", "[\"h\"]", "[\"h\",\"e\",\"l\"]", "[\"h\",5]", "[[\"h\"],\"e\"]",
        "{\"h\":\"e\"}", "[{\"h\":1},\"e\"]"}) {
    std::string doc = pairs;
    doc.insert(merges_at + 1 + pairs.substr(merges_at + 1).find(']') + 1, "," + raw);
    TempDir dir;
    dir.Write("tokenizer.json", doc);
    ExpectLoadError(dir.path(), StatusCode::kDataLoss, "tokenizer.json: model.merges[1]: expected");
  }
}

TEST(BpeVocabTest, UnsupportedOrCorruptTokenizerJson) {
  const json good = TokenizerJson(SmallVocab(), kSmallMerges, true, {});
  struct Case {
    const char* json_pointer;
    json value;
    StatusCode code;
    std::string fragment;
  };
  const Case cases[] = {
      {"/model/type", "WordPiece", StatusCode::kInvalidArgument, "model.type: only BPE"},
      {"/model/merges/0", 5, StatusCode::kDataLoss, "model.merges[0]: expected"},
      {"/model/vocab", json::array(), StatusCode::kDataLoss, "model.vocab: expected an object"},
      {"/normalizer", {{"type", "NFKC"}}, StatusCode::kInvalidArgument, "normalizer: only an NFC"},
      {"/pre_tokenizer/pretokenizers/0/pattern/Regex", "(\\p{L}+", StatusCode::kInvalidArgument,
       "pre_tokenizer.pretokenizers[0].pattern.Regex: pre-tokenizer pattern does not compile"},
      {"/pre_tokenizer/pretokenizers/0/pattern/Regex", "[\\S]", StatusCode::kInvalidArgument,
       "\\S inside a character class"},
      {"/pre_tokenizer/pretokenizers/0/invert", true, StatusCode::kInvalidArgument,
       "only an Isolated, non-inverted split"},
      {"/pre_tokenizer/pretokenizers/1", PreTokenizerJson()["pretokenizers"][0],
       StatusCode::kInvalidArgument, "a second Split step"},
      {"/pre_tokenizer",
       {{"type", "Whitespace"}},
       StatusCode::kInvalidArgument,
       "type \"Whitespace\" is not supported"},
      {"/model", nullptr, StatusCode::kDataLoss, "model: expected an object"},
  };
  for (const Case& c : cases) {
    json doc = good;
    doc[json::json_pointer(c.json_pointer)] = c.value;
    TempDir dir;
    dir.Write("tokenizer.json", doc.dump());
    ExpectLoadError(dir.path(), c.code, c.fragment);
  }
  TempDir not_json;
  not_json.Write("tokenizer.json", "{\"model\": ");
  ExpectLoadError(not_json.path(), StatusCode::kDataLoss, "tokenizer.json: not valid JSON");
}

}  // namespace
}  // namespace dscale
