#pragma once
// Loading a byte-level BPE tokenizer's data from a Hugging Face checkpoint folder, in either
// layout:
//   - vocab.json (token -> id) + merges.txt (one "left right" pair per line, by rank), with
//     optional added_tokens.json (token -> id) and tokenizer_config.json, whose
//     added_tokens_decoder gives each added token's flags;
//   - tokenizer.json: model.vocab, model.merges (strings "left right" or [left, right]
//     pairs) and added_tokens.
// Only plain data is produced here; Tokenizer (tokenizer.h) builds its indexes from it.
//
// Errors name the file and field: NotFound for a missing file, DataLoss for a file that is
// not what it should be, InvalidArgument for a tokenizer this library cannot reproduce
// (another pre-tokenizer, or lstrip/rstrip/single_word added tokens).

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "io/tokenizer/pretokenizer.h"

namespace dscale {

// A token matched verbatim in the text before BPE runs (e.g. "<|im_start|>", "<think>").
struct AddedToken {
  std::string content;  // raw text, not byte-level spelled
  int32_t id = 0;
  bool special = false;  // dropped by Decode when skip_special is set
};

struct BpeVocab {
  // Byte-level spelled token -> id.
  std::vector<std::pair<std::string, int32_t>> vocab;
  // Merge rules, best (lowest rank) first; both sides byte-level spelled.
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<AddedToken> added_tokens;
  // tokenizer.json's model.ignore_merges: a piece that is itself a vocab entry is emitted
  // whole, without merging.
  bool ignore_merges = false;
  // Whether text is put in NFC before splitting: true for Qwen's files; tokenizer.json says
  // so with its normalizer.
  bool nfc = true;
  // The pre-tokenizer's split regex: tokenizer.json's Split pattern; Qwen2's for vocab.json +
  // merges.txt folders.
  std::string split_pattern = std::string(kQwen2SplitPattern);
  // The end-of-sequence token's text, when the folder names one.
  std::optional<std::string> eos_token;
  // The checkpoint's chat template (Jinja source): tokenizer_config.json's chat_template, else
  // the folder's chat_template.jinja; empty when it has neither. Only read to tell the chat
  // formats apart (chat_format.h); dscale applies its own code for each.
  std::string chat_template;
  // Where vocab and merges came from (file paths), for error messages.
  std::string vocab_source = "vocab";
  std::string merges_source = "merges";
  std::string added_source = "added tokens";
};

// Loads `dir`: tokenizer.json when present, else vocab.json + merges.txt (+ optional files).
Result<BpeVocab> LoadBpeVocab(const std::filesystem::path& dir);

// The two layouts, file by file. Empty optional paths are skipped.
Result<BpeVocab> LoadVocabAndMerges(const std::filesystem::path& vocab_json,
                                    const std::filesystem::path& merges_txt,
                                    const std::filesystem::path& added_tokens_json = {},
                                    const std::filesystem::path& tokenizer_config_json = {});
Result<BpeVocab> LoadTokenizerJson(const std::filesystem::path& tokenizer_json);

// Reads a whole tokenizer file: a regular file of at most kMaxTokenizerFileBytes (Qwen3's
// tokenizer.json, the largest, is 11 MB); NotFound when it does not exist, IoError when it is
// not a regular file (a FIFO, /dev/zero) or cannot be read, DataLoss when it is too large.
inline constexpr size_t kMaxTokenizerFileBytes = size_t{256} << 20;
Result<std::string> ReadTokenizerFile(const std::filesystem::path& path);

}  // namespace dscale
