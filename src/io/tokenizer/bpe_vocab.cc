#include "io/tokenizer/bpe_vocab.h"

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <system_error>

#include "io/file_util.h"
#include "io/json_util.h"
#include "io/tokenizer/pretokenizer.h"

namespace dscale {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// Ids above this are taken as corruption rather than allocated for.
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

// obj[key] without a copy, or null when absent (json::value() copies, and the vocab is large).
const json& Field(const json& obj, const char* key) {
  static const json kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

// Typed reads that never throw: a missing or mistyped field gives the fallback.
std::string StringField(const json& obj, const char* key, const char* fallback) {
  const json& v = Field(obj, key);
  return v.is_string() ? v.get<std::string>() : fallback;
}
bool BoolField(const json& obj, const char* key, bool fallback) {
  const json& v = Field(obj, key);
  return v.is_boolean() ? v.get<bool>() : fallback;
}

Result<json> ParseJsonFile(const fs::path& path) {
  DSCALE_ASSIGN_OR_RETURN(std::string text, ReadTokenizerFile(path));
  Result<json> doc = ParseJsonDocument(text);
  if (!doc.ok()) return doc.status().WithContext(path.string());
  if (!doc->is_object()) return DataLoss(path.string() + ": expected a JSON object at the top");
  return std::move(doc).value();
}

Status NotATokenId(const std::string& where) {
  return DataLoss(where + ": expected a token id (an integer from 0 to " +
                  std::to_string(kMaxTokenId) + ")");
}

// Checked as the JSON number it is: a float, a negative id or one past the limit (however
// large) is not a token id.
Result<int32_t> ParseId(const json& value, const std::string& where) {
  const Result<int64_t> id = ReadJsonInt(value, where, 0, kMaxTokenId);
  if (!id.ok()) return NotATokenId(where);
  return static_cast<int32_t>(*id);
}

// An object of token -> id held in a parsed document (tokenizer.json's model.vocab).
Result<std::vector<std::pair<std::string, int32_t>>> ParseTokenToId(const json& doc,
                                                                    const std::string& where) {
  if (!doc.is_object()) return DataLoss(where + ": expected an object of token -> id");
  std::vector<std::pair<std::string, int32_t>> out;
  out.reserve(doc.size());
  for (const auto& [token, value] : doc.items()) {
    DSCALE_ASSIGN_OR_RETURN(const int32_t id, ParseId(value, where + ": token \"" + token + "\""));
    out.emplace_back(token, id);
  }
  return out;
}

// Streams a file that is one flat object of token -> id (vocab.json, added_tokens.json)
// straight into pairs. Building nlohmann's document for vocab.json (150k keys in a
// std::map) would cost several times the parse itself, and load time is start-up time.
class TokenToIdReader {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  bool number_integer(number_integer_t v) { return Id(v); }
  bool number_unsigned(number_unsigned_t v) {
    return Id(v > static_cast<number_unsigned_t>(kMaxTokenId) ? -1 : static_cast<int64_t>(v));
  }
  bool start_object(size_t) { return ++depth_ == 1 || Fail("expected an object of token -> id"); }
  bool end_object() { return --depth_, true; }
  bool key(string_t& k) {
    key_ = std::move(k);
    return true;
  }
  bool null() { return Id(-1); }
  bool boolean(bool) { return Id(-1); }
  bool number_float(number_float_t, const string_t&) { return Id(-1); }
  bool string(string_t&) { return Id(-1); }
  bool binary(binary_t&) { return Id(-1); }
  bool start_array(size_t) {
    return depth_ == 0 ? Fail("expected an object of token -> id") : Id(-1);
  }
  bool end_array() { return true; }
  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception&) {
    return Fail("not valid JSON (at byte " + std::to_string(position) + ")");
  }

  std::vector<std::pair<std::string, int32_t>> pairs;
  std::string error;

 private:
  bool Fail(std::string message) {
    if (error.empty()) error = std::move(message);
    return false;
  }
  bool Id(int64_t id) {
    if (depth_ == 0) return Fail("expected an object of token -> id");
    if (depth_ != 1 || id < 0 || id > kMaxTokenId) {
      return Fail("token \"" + key_ + "\": expected a token id (an integer from 0 to " +
                  std::to_string(kMaxTokenId) + ")");
    }
    pairs.emplace_back(std::move(key_), static_cast<int32_t>(id));
    return true;
  }

  int depth_ = 0;
  std::string key_;
};

Result<std::vector<std::pair<std::string, int32_t>>> ReadTokenToIdFile(const fs::path& path) {
  DSCALE_ASSIGN_OR_RETURN(std::string text, ReadTokenizerFile(path));
  TokenToIdReader reader;
  reader.pairs.reserve(text.size() / 16);
  const bool ok = json::sax_parse(text, &reader);
  if (!ok || !reader.error.empty()) {
    return DataLoss(path.string() + ": " +
                    (reader.error.empty() ? std::string("not valid JSON") : reader.error));
  }
  return std::move(reader.pairs);
}

using Merge = std::pair<std::string, std::string>;

// "left right": exactly one space, neither side empty (byte-level tokens spell a space "Ġ").
std::optional<Merge> SplitMerge(std::string_view line) {
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
      line.find(' ', space + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  return Merge(line.substr(0, space), line.substr(space + 1));
}

Status BadMerge(const std::string& where, std::string_view line) {
  return DataLoss(where + ": expected two tokens separated by one space, got \"" +
                  std::string(line) + "\"");
}

Result<std::vector<Merge>> ParseMergesTxt(std::string_view text, const std::string& path) {
  std::vector<Merge> merges;
  size_t line_number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF copies exist
    if (line.empty() || (line_number == 1 && line.starts_with("#version"))) continue;
    std::optional<Merge> merge = SplitMerge(line);
    if (!merge) return BadMerge(path + " line " + std::to_string(line_number), line);
    merges.push_back(std::move(*merge));
  }
  return merges;
}

// lstrip / rstrip / single_word change how an added token matches; Qwen's never set them,
// and matching them wrongly would silently change ids, so they are refused.
Status CheckAddedTokenFlags(const json& entry, const std::string& where) {
  for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
    auto it = entry.find(flag);
    if (it == entry.end() || it->is_null()) continue;
    if (!it->is_boolean()) return DataLoss(where + "." + flag + ": expected a boolean");
    if (it->get<bool>()) return InvalidArgument(where + "." + flag + ": true is not supported");
  }
  return Status::Ok();
}

// One entry of tokenizer_config.json's added_tokens_decoder or tokenizer.json's added_tokens.
Result<AddedToken> ParseAddedTokenEntry(const json& entry, const std::string& where) {
  if (!entry.is_object()) return DataLoss(where + ": expected an object");
  auto content = entry.find("content");
  if (content == entry.end() || !content->is_string() || content->get<std::string>().empty()) {
    return DataLoss(where + ".content: expected a non-empty string");
  }
  AddedToken token;
  token.content = content->get<std::string>();
  if (auto special = entry.find("special"); special != entry.end()) {
    if (!special->is_boolean()) return DataLoss(where + ".special: expected a boolean");
    token.special = special->get<bool>();
  }
  DSCALE_RETURN_IF_ERROR(CheckAddedTokenFlags(entry, where));
  return token;
}

// Merges added_tokens.json (content -> id) with added_tokens_decoder (id -> flags).
Result<std::vector<AddedToken>> MergeAddedTokens(
    const std::vector<std::pair<std::string, int32_t>>& plain,
    const std::map<int32_t, AddedToken>& decoded, const std::string& plain_path) {
  std::map<int32_t, AddedToken> by_id = decoded;
  for (const auto& [content, id] : plain) {
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      by_id.emplace(id, AddedToken{content, id, false});
    } else if (it->second.content != content) {
      return DataLoss(plain_path + ": token \"" + content + "\" has id " + std::to_string(id) +
                      ", which tokenizer_config.json gives to \"" + it->second.content + "\"");
    }
  }
  std::vector<AddedToken> out;
  for (auto& [id, token] : by_id) out.push_back(std::move(token));
  return out;
}

// tokenizer_config.json's chat_template: a string, or a list of {name, template} whose "default"
// entry is the one applied; anything else is left unread.
std::string ChatTemplateOf(const json& doc) {
  auto it = doc.find("chat_template");
  if (it == doc.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) return {};
  for (const json& entry : *it) {
    if (entry.is_object() && entry.value("name", json()) == "default" &&
        entry.value("template", json()).is_string()) {
      return entry["template"].get<std::string>();
    }
  }
  return {};
}

// tokenizer_config.json: added_tokens_decoder, eos_token and chat_template; everything else is
// ignored.
Status ParseTokenizerConfig(const json& doc, const std::string& path,
                            std::map<int32_t, AddedToken>* decoded, std::optional<std::string>* eos,
                            std::string* chat_template) {
  *chat_template = ChatTemplateOf(doc);
  if (auto it = doc.find("added_tokens_decoder"); it != doc.end()) {
    if (!it->is_object()) return DataLoss(path + ": added_tokens_decoder: expected an object");
    for (const auto& [key, entry] : it->items()) {
      const std::string where = path + ": added_tokens_decoder[\"" + key + "\"]";
      char* end = nullptr;
      const long long id = std::strtoll(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || id < 0 || id > kMaxTokenId) {
        return DataLoss(where + ": expected the key to be a token id");
      }
      DSCALE_ASSIGN_OR_RETURN(AddedToken token, ParseAddedTokenEntry(entry, where));
      token.id = static_cast<int32_t>(id);
      decoded->emplace(token.id, std::move(token));
    }
  }
  if (auto it = doc.find("eos_token"); it != doc.end()) {
    if (it->is_string()) {
      *eos = it->get<std::string>();
    } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
      *eos = (*it)["content"].get<std::string>();
    } else if (!it->is_null()) {
      return DataLoss(path + ": eos_token: expected a string or an object with content");
    }
  }
  return Status::Ok();
}

// tokenizer.json's pre_tokenizer must be a byte-level BPE one (Qwen2's, Llama 3's): one Split
// on a regex (Isolated), whose pattern lands in *pattern, and a ByteLevel step that only
// re-spells bytes.
Status CheckPreTokenizer(const json& pre, const std::string& where,
                         std::optional<std::string>* pattern) {
  if (!pre.is_object() || !pre.contains("type") || !pre["type"].is_string()) {
    return InvalidArgument(where + ": expected a byte-level pre-tokenizer (Split, then ByteLevel)");
  }
  const std::string type = pre["type"].get<std::string>();
  if (type == "Sequence") {
    auto steps = pre.find("pretokenizers");
    if (steps == pre.end() || !steps->is_array()) {
      return DataLoss(where + ".pretokenizers: expected an array");
    }
    for (size_t i = 0; i < steps->size(); ++i) {
      DSCALE_RETURN_IF_ERROR(CheckPreTokenizer(
          (*steps)[i], where + ".pretokenizers[" + std::to_string(i) + "]", pattern));
    }
    return Status::Ok();
  }
  if (type == "Split") {
    const json& regex = Field(pre, "pattern");
    if (!regex.is_object() || !regex.contains("Regex") || !regex["Regex"].is_string()) {
      return InvalidArgument(where + ".pattern: expected {\"Regex\": \"...\"}");
    }
    if (StringField(pre, "behavior", "Isolated") != "Isolated" || BoolField(pre, "invert", false)) {
      return InvalidArgument(where + ": only an Isolated, non-inverted split is supported");
    }
    if (pattern->has_value()) {
      return InvalidArgument(where + ": a second Split step (only one is supported)");
    }
    *pattern = regex["Regex"].get<std::string>();
    // Refused here, naming the field, rather than when a Tokenizer is made from the vocab.
    const Result<PreTokenizer> compiled = PreTokenizer::Create(**pattern);
    if (!compiled.ok()) return compiled.status().WithContext(where + ".pattern.Regex");
    return Status::Ok();
  }
  if (type == "ByteLevel") {
    if (BoolField(pre, "use_regex", true) || BoolField(pre, "add_prefix_space", false)) {
      return InvalidArgument(where +
                             ": ByteLevel with use_regex or add_prefix_space is not "
                             "supported (Qwen2 and Llama 3 set both to false)");
    }
    return Status::Ok();
  }
  return InvalidArgument(where + ": pre-tokenizer type \"" + type + "\" is not supported");
}

// tokenizer.json's normalizer: NFC (Qwen) or none.
Result<bool> ParseNormalizer(const json& doc, const std::string& where) {
  auto it = doc.find("normalizer");
  if (it == doc.end() || it->is_null()) return false;
  if (StringField(*it, "type", "") == "NFC") return true;
  if (StringField(*it, "type", "") == "Sequence") {
    const json& steps = Field(*it, "normalizers");
    if (steps.is_array() && steps.size() == 1 && StringField(steps[0], "type", "") == "NFC") {
      return true;
    }
  }
  return InvalidArgument(where + ": only an NFC normalizer (or none) is supported");
}

// One entry of model.merges: "left right" or ["left", "right"].
Result<Merge> ParseJsonMerge(const json& m, const std::string& where) {
  if (m.is_string()) {
    const std::string& line = m.get_ref<const std::string&>();
    std::optional<Merge> merge = SplitMerge(line);
    if (!merge) return BadMerge(where, line);
    return std::move(*merge);
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return Merge(m[0].get<std::string>(), m[1].get<std::string>());
  }
  return DataLoss(where + ": expected \"left right\" or [\"left\", \"right\"]");
}

std::string MergeWhere(const std::string& where, size_t i) {
  return where + "[" + std::to_string(i) + "]";
}

Result<std::vector<Merge>> ParseJsonMerges(const json& merges, const std::string& where) {
  if (!merges.is_array()) return DataLoss(where + ": expected an array");
  std::vector<Merge> out;
  out.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    DSCALE_ASSIGN_OR_RETURN(Merge merge, ParseJsonMerge(merges[i], MergeWhere(where, i)));
    out.push_back(std::move(merge));
  }
  return out;
}

// tokenizer.json in one pass: model.vocab and model.merges, nearly all of the file (Llama 3's:
// 128,000 tokens, 280,147 merges), go straight into pairs as the parser reads them, and the rest
// becomes a document. Built into nlohmann's document first, the vocab's 128,000-key std::map and
// its teardown took about a third of a Llama 3 tokenizer's load. Entries are checked as
// ParseTokenToId and ParseJsonMerges check them, with their messages; a vocab or merges that is
// not an object or array, and everything else, stays in the document for the usual checks.
//
// nlohmann's callback parser reports a container's start even inside a value it has been told to
// drop, but not its end, so the frames below are exact only while nothing is dropped except the
// streamed entries themselves; the first bad entry ends the streaming (the load fails with it).
class TokenizerJsonReader {
 public:
  using Event = json::parse_event_t;

  explicit TokenizerJsonReader(const std::string& path)
      : vocab_where_(path + ": model.vocab"), merges_where_(path + ": model.merges") {}

  bool operator()(int /*depth*/, Event event, json& parsed) {
    if (failed_) return true;
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        return Start(event == Event::object_start);
      case Event::key:
        return Key(parsed);
      case Event::value:
        return Value(parsed);
      case Event::object_end:
      case Event::array_end:
        return End(parsed);
    }
    return true;
  }

  // Set when the whole of model.vocab (an object) or model.merges (an array) was streamed.
  std::optional<std::vector<std::pair<std::string, int32_t>>> vocab;
  std::optional<std::vector<Merge>> merges;
  Status vocab_error, merges_error;
  // Some object outside the streamed ones ended with fewer members than keys: a key named twice.
  bool repeated = false;

 private:
  enum class Stream { kNone, kVocab, kMerges, kMergePair };
  struct Frame {
    bool object = false;
    Stream stream = Stream::kNone;
    std::string key;   // objects: the last key read
    size_t keys = 0;   // objects: keys read
    size_t items = 0;  // kMerges: entries read
  };

  bool Fail(Status* slot, Status error) {
    *slot = std::move(error);
    failed_ = true;
    return false;
  }

  bool Start(bool object) {
    Stream stream = Stream::kNone;
    if (!frames_.empty()) {
      const Frame& parent = frames_.back();
      if (parent.stream == Stream::kVocab) {  // a container where an id should be
        return Fail(&vocab_error, NotATokenId(vocab_where_ + ": token \"" + token_ + "\""));
      }
      if (parent.stream == Stream::kMerges) {
        if (object) {  // an entry that is neither a string nor a pair
          return Fail(&merges_error, ParseJsonMerge(json::object(), ItemWhere()).status());
        }
        stream = Stream::kMergePair;
      }
    }
    if (frames_.size() == 2 && frames_[0].object && frames_[0].key == "model" &&
        frames_[1].object) {
      if (object && frames_[1].key == "vocab") {
        stream = Stream::kVocab;
        vocab.emplace();
      } else if (!object && frames_[1].key == "merges") {
        stream = Stream::kMerges;
        merges.emplace();
      }
    }
    frames_.push_back({.object = object, .stream = stream});
    return true;
  }

  bool Key(json& parsed) {
    if (frames_.empty() || !parsed.is_string()) return true;
    Frame& frame = frames_.back();
    std::string& key = parsed.get_ref<std::string&>();
    if (frame.stream == Stream::kVocab) {
      token_ = std::move(key);
      return false;  // the entry is kept in `vocab`, not in the document
    }
    frame.key = key;
    ++frame.keys;
    return true;
  }

  bool Value(json& parsed) {
    if (frames_.empty()) return true;
    Frame& frame = frames_.back();
    if (frame.stream == Stream::kVocab) {
      const Result<int32_t> id = ParseId(parsed, vocab_where_ + ": token \"" + token_ + "\"");
      if (!id.ok()) return Fail(&vocab_error, id.status());
      vocab->emplace_back(std::move(token_), *id);
      return false;
    }
    if (frame.stream == Stream::kMerges) {
      Result<Merge> merge = ParseJsonMerge(parsed, ItemWhere());
      if (!merge.ok()) return Fail(&merges_error, merge.status());
      merges->push_back(std::move(*merge));
      ++frame.items;
      return false;
    }
    return true;
  }

  bool End(const json& parsed) {
    if (frames_.empty()) return true;
    const Frame frame = std::move(frames_.back());
    frames_.pop_back();
    if (frame.stream == Stream::kMergePair) {
      Result<Merge> merge = ParseJsonMerge(parsed, ItemWhere());
      if (!merge.ok()) return Fail(&merges_error, merge.status());
      merges->push_back(std::move(*merge));
      ++frames_.back().items;
      return false;  // dropped from the (empty) merges array of the document
    }
    if (frame.object && frame.stream == Stream::kNone && parsed.size() != frame.keys) {
      repeated = true;
    }
    return true;
  }

  // The merges entry being read.
  std::string ItemWhere() const {
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
      if (it->stream == Stream::kMerges) return MergeWhere(merges_where_, it->items);
    }
    return merges_where_;
  }

  const std::string vocab_where_, merges_where_;
  std::vector<Frame> frames_;
  std::string token_;  // the vocab key whose id comes next
  bool failed_ = false;
};

Status CheckModelOptions(const json& model, const std::string& where) {
  if (StringField(model, "type", "BPE") != "BPE") {
    return InvalidArgument(where + ".type: only BPE is supported");
  }
  if (BoolField(model, "byte_fallback", false)) {
    return InvalidArgument(where + ".byte_fallback: true is not supported");
  }
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json& v = Field(model, affix);
    if (!v.is_null() && !(v.is_string() && v.get<std::string>().empty())) {
      return InvalidArgument(where + "." + affix + ": not supported");
    }
  }
  return Status::Ok();
}

Result<std::vector<AddedToken>> ParseJsonAddedTokens(const json& doc, const std::string& where) {
  auto it = doc.find("added_tokens");
  if (it == doc.end() || it->is_null()) return std::vector<AddedToken>();
  if (!it->is_array()) return DataLoss(where + ": expected an array");
  std::vector<AddedToken> out;
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string item = where + "[" + std::to_string(i) + "]";
    DSCALE_ASSIGN_OR_RETURN(AddedToken token, ParseAddedTokenEntry((*it)[i], item));
    const json& id = Field((*it)[i], "id");
    DSCALE_ASSIGN_OR_RETURN(token.id, ParseId(id, item + ".id"));
    out.push_back(std::move(token));
  }
  return out;
}

}  // namespace

Result<std::string> ReadTokenizerFile(const fs::path& path) {
  if (!PathExists(path.string())) return NotFound(path.string() + ": no such file");
  return ReadFileToString(path.string(), kMaxTokenizerFileBytes);
}

Result<BpeVocab> LoadVocabAndMerges(const fs::path& vocab_json, const fs::path& merges_txt,
                                    const fs::path& added_tokens_json,
                                    const fs::path& tokenizer_config_json) {
  BpeVocab vocab;
  vocab.vocab_source = vocab_json.string();
  vocab.merges_source = merges_txt.string();
  DSCALE_ASSIGN_OR_RETURN(vocab.vocab, ReadTokenToIdFile(vocab_json));
  DSCALE_ASSIGN_OR_RETURN(std::string merges_text, ReadTokenizerFile(merges_txt));
  DSCALE_ASSIGN_OR_RETURN(vocab.merges, ParseMergesTxt(merges_text, vocab.merges_source));

  std::vector<std::pair<std::string, int32_t>> plain;
  if (!added_tokens_json.empty() || !tokenizer_config_json.empty()) {
    vocab.added_source =
        !added_tokens_json.empty() && !tokenizer_config_json.empty()
            ? added_tokens_json.string() + " / " + tokenizer_config_json.string()
            : (added_tokens_json.empty() ? tokenizer_config_json : added_tokens_json).string();
  }
  if (!added_tokens_json.empty()) {
    DSCALE_ASSIGN_OR_RETURN(plain, ReadTokenToIdFile(added_tokens_json));
  }
  std::map<int32_t, AddedToken> decoded;
  if (!tokenizer_config_json.empty()) {
    DSCALE_ASSIGN_OR_RETURN(json doc, ParseJsonFile(tokenizer_config_json));
    DSCALE_RETURN_IF_ERROR(ParseTokenizerConfig(doc, tokenizer_config_json.string(), &decoded,
                                                &vocab.eos_token, &vocab.chat_template));
  }
  DSCALE_ASSIGN_OR_RETURN(vocab.added_tokens,
                          MergeAddedTokens(plain, decoded, added_tokens_json.string()));
  return vocab;
}

Result<BpeVocab> LoadTokenizerJson(const fs::path& tokenizer_json) {
  const std::string path = tokenizer_json.string();
  DSCALE_ASSIGN_OR_RETURN(const std::string text, ReadTokenizerFile(tokenizer_json));
  TokenizerJsonReader reader(path);
  const json doc = json::parse(
      text.begin(), text.end(),
      [&reader](int depth, json::parse_event_t event, json& parsed) {
        return reader(depth, event, parsed);
      },
      /*allow_exceptions=*/false);
  if (doc.is_discarded()) return DataLoss(path + ": not valid JSON");
  if (reader.repeated) {  // read again, keeping every key, to name the one named twice
    const Result<json> again = ParseJsonDocument(text);
    return DataLoss(
        path + ": " +
        (again.ok() ? std::string("duplicate key") : std::string(again.status().message())));
  }
  if (!doc.is_object()) return DataLoss(path + ": expected a JSON object at the top");
  auto model = doc.find("model");
  if (model == doc.end() || !model->is_object()) {
    return DataLoss(path + ": model: expected an object");
  }
  DSCALE_RETURN_IF_ERROR(CheckModelOptions(*model, path + ": model"));
  BpeVocab vocab;
  vocab.vocab_source = path + ": model.vocab";
  vocab.merges_source = path + ": model.merges";
  vocab.added_source = path + ": added_tokens";
  DSCALE_RETURN_IF_ERROR(reader.vocab_error);
  DSCALE_RETURN_IF_ERROR(reader.merges_error);
  if (reader.vocab) {
    vocab.vocab = std::move(*reader.vocab);
  } else {
    DSCALE_ASSIGN_OR_RETURN(vocab.vocab,
                            ParseTokenToId(Field(*model, "vocab"), vocab.vocab_source));
  }
  if (reader.merges) {
    vocab.merges = std::move(*reader.merges);
  } else {
    DSCALE_ASSIGN_OR_RETURN(vocab.merges,
                            ParseJsonMerges(Field(*model, "merges"), vocab.merges_source));
  }
  const json& ignore_merges = Field(*model, "ignore_merges");
  if (!ignore_merges.is_null() && !ignore_merges.is_boolean())
    return DataLoss(path + ": model.ignore_merges: expected a boolean");
  vocab.ignore_merges = ignore_merges.is_boolean() && ignore_merges.get<bool>();
  DSCALE_ASSIGN_OR_RETURN(vocab.added_tokens, ParseJsonAddedTokens(doc, path + ": added_tokens"));
  DSCALE_ASSIGN_OR_RETURN(vocab.nfc, ParseNormalizer(doc, path + ": normalizer"));
  std::optional<std::string> pattern;
  DSCALE_RETURN_IF_ERROR(
      CheckPreTokenizer(Field(doc, "pre_tokenizer"), path + ": pre_tokenizer", &pattern));
  if (!pattern.has_value()) {
    return InvalidArgument(path + ": pre_tokenizer: the Split step is missing");
  }
  vocab.split_pattern = std::move(*pattern);
  return vocab;
}

Result<BpeVocab> LoadBpeVocab(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound(dir.string() + ": no such directory");
  auto optional_file = [&](const char* name) {
    return fs::exists(dir / name, ec) ? dir / name : fs::path();
  };
  BpeVocab vocab;
  if (fs::exists(dir / "tokenizer.json", ec)) {
    DSCALE_ASSIGN_OR_RETURN(vocab, LoadTokenizerJson(dir / "tokenizer.json"));
    if (fs::path config = optional_file("tokenizer_config.json"); !config.empty()) {
      DSCALE_ASSIGN_OR_RETURN(json doc, ParseJsonFile(config));
      std::map<int32_t, AddedToken> ignored;  // tokenizer.json's added_tokens take precedence
      DSCALE_RETURN_IF_ERROR(ParseTokenizerConfig(doc, config.string(), &ignored, &vocab.eos_token,
                                                  &vocab.chat_template));
    }
  } else if (fs::exists(dir / "vocab.json", ec)) {
    DSCALE_ASSIGN_OR_RETURN(vocab, LoadVocabAndMerges(dir / "vocab.json", dir / "merges.txt",
                                                      optional_file("added_tokens.json"),
                                                      optional_file("tokenizer_config.json")));
  } else {
    return NotFound(dir.string() + ": neither tokenizer.json nor vocab.json is there");
  }
  // Newer checkpoints keep the template in its own file.
  if (fs::path jinja = optional_file("chat_template.jinja");
      vocab.chat_template.empty() && !jinja.empty()) {
    DSCALE_ASSIGN_OR_RETURN(vocab.chat_template, ReadTokenizerFile(jinja));
  }
  return vocab;
}

}  // namespace dscale
