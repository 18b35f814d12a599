#include "io/tokenizer/tokenizer.h"

#include <algorithm>

#include "io/tokenizer/bpe.h"
#include "io/tokenizer/byte_level.h"
#include "io/tokenizer/pretokenizer.h"
#include "io/tokenizer/unicode_nfc.h"
#include "io/tokenizer/utf8.h"

namespace dscale {
namespace {

// Ids above this are refused rather than allocated for (the loaders enforce it too).
constexpr int32_t kMaxId = (1 << 24) - 1;

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::Load(const std::filesystem::path& dir) {
  DSCALE_ASSIGN_OR_RETURN(BpeVocab vocab, LoadBpeVocab(dir));
  return FromVocab(vocab);
}

Result<Tokenizer> Tokenizer::FromVocab(const BpeVocab& vocab) {
  Tokenizer tokenizer;
  DSCALE_RETURN_IF_ERROR(tokenizer.AddTokens(vocab));
  DSCALE_ASSIGN_OR_RETURN(tokenizer.bpe_, BpeModel::Create(vocab));
  DSCALE_ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::Create(vocab.split_pattern));
  tokenizer.pre_tokenizer_ = std::make_unique<PreTokenizer>(std::move(pre));
  tokenizer.nfc_ = vocab.nfc;
  tokenizer.vocab_source_ = vocab.vocab_source;
  tokenizer.added_source_ = vocab.added_source;
  tokenizer.chat_template_ = vocab.chat_template;
  if (vocab.eos_token) {
    // Left unset when the named token is not an added token; generation_config.json is the
    // authority on stop tokens anyway.
    tokenizer.eos_token_id_ = tokenizer.AddedTokenId(*vocab.eos_token);
  }
  return tokenizer;
}

Status Tokenizer::CheckFitsVocabulary(int64_t vocab_size) const {
  for (int64_t id = static_cast<int64_t>(tokens_.size()) - 1; id >= vocab_size && id >= 0; --id) {
    const Token& token = tokens_[static_cast<size_t>(id)];
    if (token.kind == Kind::kUnassigned) continue;
    const bool added = token.kind == Kind::kAdded || token.kind == Kind::kSpecial;
    return InvalidArgument((added ? added_source_ : vocab_source_) + ": token \"" + token.bytes +
                           "\" has id " + std::to_string(id) +
                           ", outside the model's vocabulary of " + std::to_string(vocab_size) +
                           " ids (its config.json vocab_size)");
  }
  return Status::Ok();
}

Status Tokenizer::AddTokens(const BpeVocab& vocab) {
  int32_t limit = 0;
  for (const auto& [token, id] : vocab.vocab) limit = std::max(limit, id + 1);
  for (const AddedToken& token : vocab.added_tokens) limit = std::max(limit, token.id + 1);
  if (limit - 1 > kMaxId) return DataLoss(vocab.vocab_source + ": token id out of range");
  tokens_.assign(limit, Token{});

  for (const auto& [token, id] : vocab.vocab) {
    Token& slot = tokens_[id];
    if (slot.kind != Kind::kUnassigned) {
      return DataLoss(vocab.vocab_source + ": id " + std::to_string(id) +
                      " is given to more than one token, one of them \"" + token + "\"");
    }
    if (!byte_level::AppendDecoded(token, &slot.bytes)) {
      return DataLoss(vocab.vocab_source + ": token \"" + token + "\" (id " + std::to_string(id) +
                      ") has characters outside the byte-level alphabet");
    }
    slot.kind = Kind::kVocab;
  }
  for (const AddedToken& token : vocab.added_tokens) {
    Token& slot = tokens_[token.id];
    // An added token may repeat a vocab entry, but not rename it.
    if (slot.kind != Kind::kUnassigned && slot.bytes != token.content) {
      return DataLoss("added token \"" + token.content + "\" has id " + std::to_string(token.id) +
                      ", which is already another token's");
    }
    if (token.content.empty()) return DataLoss("an added token has empty content");
    slot = Token{token.content, token.special ? Kind::kSpecial : Kind::kAdded};
    added_.push_back(token);
  }
  for (uint32_t i = 0; i < added_.size(); ++i) {
    added_by_first_byte_[static_cast<uint8_t>(added_[i].content[0])].push_back(i);
  }
  for (auto& candidates : added_by_first_byte_) {
    std::stable_sort(candidates.begin(), candidates.end(), [&](uint32_t a, uint32_t b) {
      return added_[a].content.size() > added_[b].content.size();
    });
  }
  return Status::Ok();
}

// Text without added tokens: NFC, split, BPE.
Status Tokenizer::EncodeText(std::string_view text, std::vector<int32_t>* ids) const {
  if (text.empty()) return Status::Ok();
  std::string normalized;
  if (nfc_ && !unicode::IsCertainlyNfc(text)) {
    unicode::AppendNfc(text, &normalized);
    text = normalized;
  }
  std::vector<std::string_view> pieces;
  DSCALE_RETURN_IF_ERROR(pre_tokenizer_->Split(text, &pieces));
  for (std::string_view piece : pieces) bpe_->EncodePiece(piece, ids);
  return Status::Ok();
}

Result<std::vector<int32_t>> Tokenizer::Encode(std::string_view text,
                                               const EncodeOptions& options) const {
  if (const size_t bad = utf8::FindInvalid(text); bad != utf8::kAllValid) {
    return InvalidArgument("text is not valid UTF-8: ill-formed byte sequence at byte offset " +
                           std::to_string(bad));
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  if (!options.parse_added_tokens || added_.empty()) {
    DSCALE_RETURN_IF_ERROR(EncodeText(text, &ids));
    return ids;
  }
  size_t start = 0;  // first byte not yet encoded
  size_t pos = 0;
  while (pos < text.size()) {
    const AddedToken* match = nullptr;
    for (uint32_t i : added_by_first_byte_[static_cast<uint8_t>(text[pos])]) {
      if (text.substr(pos).starts_with(added_[i].content)) {
        match = &added_[i];
        break;
      }
    }
    if (match == nullptr) {
      ++pos;
      continue;
    }
    DSCALE_RETURN_IF_ERROR(EncodeText(text.substr(start, pos - start), &ids));
    ids.push_back(match->id);
    pos += match->content.size();
    start = pos;
  }
  DSCALE_RETURN_IF_ERROR(EncodeText(text.substr(start), &ids));
  return ids;
}

Result<std::string> Tokenizer::Decode(std::span<const int32_t> ids,
                                      const DecodeOptions& options) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string* bytes = TokenBytes(ids[i]);
    if (bytes == nullptr) {
      return InvalidArgument("ids[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                             " is not a token id (ids go up to " + std::to_string(id_limit() - 1) +
                             ")");
    }
    if (options.skip_special && IsSpecial(ids[i])) continue;
    out += *bytes;
  }
  return out;
}

const std::string* Tokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= id_limit() || tokens_[id].kind == Kind::kUnassigned) return nullptr;
  return &tokens_[id].bytes;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && id < id_limit() && tokens_[id].kind == Kind::kSpecial;
}

std::optional<int32_t> Tokenizer::AddedTokenId(std::string_view content) const {
  for (const AddedToken& token : added_) {
    if (token.content == content) return token.id;
  }
  return std::nullopt;
}

}  // namespace dscale
