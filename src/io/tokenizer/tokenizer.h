#pragma once
// Qwen's byte-level BPE tokenizer (Qwen2, Qwen2.5 and Qwen3 share it), reproducing the
// reference (Hugging Face) tokenizer id for id:
//   1. added tokens ("<|im_start|>", "<think>", ...) are matched first, leftmost-longest;
//   2. the text between them is put in NFC (unicode_nfc.h) and split by Qwen2's pattern
//      (pretokenizer.h);
//   3. each piece is BPE-encoded over its bytes (bpe.h).
// No BOS token is added.
//
// Input must be valid UTF-8: Encode returns InvalidArgument naming the byte offset of the
// first ill-formed sequence and encodes nothing. (The reference would either reject the text
// or, in Python, never see it, since a str cannot hold ill-formed UTF-8; silently repairing
// it would change what the user asked.) A caller that prefers repair can pass the text
// through utf8::ToValidUtf8 first.
//
// Decode returns the exact bytes the ids spell, so Decode(Encode(x)) == x for any x in NFC.
// Those bytes need not be valid UTF-8 when the ids cut a character; StreamDecoder
// (stream_decoder.h) is the tool for text that is shown as it is generated.
//
// Thread-safe: Encode and Decode may run concurrently on one Tokenizer.

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "io/tokenizer/bpe_vocab.h"

namespace dscale {

class BpeModel;
class PreTokenizer;

struct EncodeOptions {
  // Match added tokens in the text. Off, their text is encoded like any other text: use that
  // for user content that must not be able to inject control tokens such as "<|im_end|>".
  bool parse_added_tokens = true;
};

struct DecodeOptions {
  bool skip_special = false;  // leave out tokens marked special (e.g. "<|im_end|>")
};

class Tokenizer {
 public:
  // Loads a checkpoint folder (see bpe_vocab.h for the layouts it accepts).
  static Result<Tokenizer> Load(const std::filesystem::path& dir);
  // DataLoss when the vocab is inconsistent (duplicate ids, a merge of unknown tokens, a
  // token outside the byte-level alphabet).
  static Result<Tokenizer> FromVocab(const BpeVocab& vocab);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  Result<std::vector<int32_t>> Encode(std::string_view text,
                                      const EncodeOptions& options = {}) const;

  // InvalidArgument naming the position of an id that is not a token.
  Result<std::string> Decode(std::span<const int32_t> ids, const DecodeOptions& options = {}) const;

  // The bytes of one token, or nullptr when `id` is not a token.
  const std::string* TokenBytes(int32_t id) const;
  bool IsSpecial(int32_t id) const;
  // The id of an added token, by its text ("<|im_end|>").
  std::optional<int32_t> AddedTokenId(std::string_view content) const;
  // From tokenizer_config.json's eos_token, when the folder has one.
  std::optional<int32_t> eos_token_id() const { return eos_token_id_; }
  // The checkpoint's chat template source (BpeVocab::chat_template); empty when it has none.
  const std::string& chat_template() const { return chat_template_; }
  // One past the largest token id (unassigned ids below it may exist).
  int32_t id_limit() const { return static_cast<int32_t>(tokens_.size()); }
  // InvalidArgument naming the file and the token when a token's id is not below `vocab_size`,
  // the vocabulary of the model the tokenizer is used with: text would encode to ids the model
  // cannot embed, and the model could never generate the token.
  Status CheckFitsVocabulary(int64_t vocab_size) const;

 private:
  enum class Kind : uint8_t { kUnassigned, kVocab, kAdded, kSpecial };
  struct Token {
    std::string bytes;
    Kind kind = Kind::kUnassigned;
  };

  Tokenizer();
  Status AddTokens(const BpeVocab& vocab);
  Status EncodeText(std::string_view text, std::vector<int32_t>* ids) const;

  std::vector<Token> tokens_;  // by id
  std::string vocab_source_;   // where the vocab and the added tokens came from, for errors
  std::string added_source_;
  std::vector<AddedToken> added_;
  // Indices into added_ by first byte, longest content first: the candidates at a position.
  std::array<std::vector<uint32_t>, 256> added_by_first_byte_;
  std::unique_ptr<BpeModel> bpe_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  bool nfc_ = true;
  std::optional<int32_t> eos_token_id_;
  std::string chat_template_;
};

}  // namespace dscale
