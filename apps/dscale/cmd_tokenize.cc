// dscale tokenize: the tokenizer from the command line, for tests and debugging.
//   dscale tokenize --tokenizer DIR --text "Hello world"      -> {"ids":[9707,1879]}
//   dscale tokenize --tokenizer DIR --file prompt.txt --chat  -> ids of the chat-formatted turn
//   dscale tokenize --tokenizer DIR --decode --ids 9707,1879  -> {"text":"Hello world"}
//   dscale tokenize --tokenizer DIR --jsonl texts.jsonl        -> a line of ids per line of F
// --jsonl loads the tokenizer once for many texts (a Llama 3 tokenizer.json takes about a second).

#include <charconv>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "core/status.h"
#include "io/file_util.h"
#include "io/json_util.h"
#include "io/tokenizer/bpe_vocab.h"
#include "io/tokenizer/chat_template.h"
#include "io/tokenizer/tokenizer.h"
#include "io/tokenizer/utf8.h"
#include "prompt_input.h"

namespace dscale::cli {
namespace {

struct TokenizeArgs {
  std::string tokenizer_dir;
  std::string text;
  std::string file;
  std::string ids;
  std::string jsonl;
  bool decode = false;
  bool chat = false;
  bool skip_special = false;
  // Which options were given (an empty --text is still a text).
  bool has_text = false, has_file = false, has_ids = false, has_jsonl = false;
};

constexpr int kRuntimeError = 1;
constexpr int kUsageError = 2;

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "dscale tokenize: %s\n", message.c_str());
  return code;
}

// "" when the combination of options is valid, else what is wrong with it.
std::string UsageProblem(const TokenizeArgs& a) {
  if (a.tokenizer_dir.empty()) return "--tokenizer DIR is required";
  if (a.has_jsonl) {
    if (a.has_text || a.has_file || a.has_ids) return "--jsonl takes no --text, --file or --ids";
    if (a.chat && a.decode) return "--chat is only for encoding";
    if (a.skip_special && !a.decode) return "--skip-special is only for --decode";
    return "";
  }
  if (a.decode) {
    if (!a.has_ids) return "--decode needs --ids, e.g. --ids 9707,1879";
    if (a.has_text || a.has_file || a.chat)
      return "--decode takes --ids, not --text, --file or --chat";
    return "";
  }
  if (a.has_ids) return "--ids is only for --decode";
  if (a.skip_special) return "--skip-special is only for --decode";
  if (a.has_text == a.has_file) return "give exactly one of --text S or --file F";
  return "";
}

Result<std::vector<int32_t>> ParseIds(const std::string& list) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos < list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    const std::string item = list.substr(pos, end - pos);
    int32_t id = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size()) {
      return InvalidArgument("--ids: \"" + item + "\" is not a token id");
    }
    ids.push_back(id);
    pos = end + 1;
  }
  return ids;
}

void PrintJson(const nlohmann::json& doc) { std::printf("%s\n", doc.dump().c_str()); }

// {"text": ...} for `ids`.
Result<nlohmann::json> DecodeToJson(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                                    bool skip_special) {
  Result<std::string> text = tokenizer.Decode(ids, DecodeOptions{.skip_special = skip_special});
  if (!text.ok()) return text.status();
  // JSON strings must be valid UTF-8; ids that cut a character show U+FFFD there.
  return nlohmann::json{{"text", utf8::ToValidUtf8(*text)}};
}

// {"ids": [...]} for `text`, as one user turn of the tokenizer's chat format when `chat`.
Result<nlohmann::json> EncodeToJson(const Tokenizer& tokenizer, std::string text, bool chat) {
  if (chat) {
    const ChatMessage turn{.role = "user", .content = text};
    Result<std::string> formatted = ApplyChatTemplate(ChatFormatOf(tokenizer), {&turn, 1});
    if (!formatted.ok()) return formatted.status();
    text = std::move(formatted).value();
  }
  Result<std::vector<int32_t>> ids = tokenizer.Encode(text);
  if (!ids.ok()) return ids.status();
  return nlohmann::json{{"ids", *ids}};
}

int RunDecode(const Tokenizer& tokenizer, const TokenizeArgs& args) {
  Result<std::vector<int32_t>> ids = ParseIds(args.ids);
  if (!ids.ok()) return Fail(kUsageError, ids.status().message());
  Result<nlohmann::json> doc = DecodeToJson(tokenizer, *ids, args.skip_special);
  if (!doc.ok()) return Fail(kRuntimeError, doc.status().message());
  PrintJson(*doc);
  return 0;
}

int RunEncode(const Tokenizer& tokenizer, const TokenizeArgs& args) {
  std::string text = args.text;
  if (args.has_file) {
    Result<std::string> contents = ReadFileToString(args.file);
    if (!contents.ok()) return Fail(kRuntimeError, contents.status().message());
    text = std::move(contents).value();
  }
  Result<nlohmann::json> doc = EncodeToJson(tokenizer, std::move(text), args.chat);
  if (!doc.ok()) return Fail(kRuntimeError, doc.status().message());
  PrintJson(*doc);
  return 0;
}

// One line of --jsonl: {"text": S} or {"text": S, "chat": true} to encode, {"ids": [...]} with
// --decode.
Result<nlohmann::json> RunJsonlLine(const Tokenizer& tokenizer, const TokenizeArgs& args,
                                    const std::string& line) {
  DSCALE_ASSIGN_OR_RETURN(const nlohmann::json in, ParseJsonDocument(line));
  if (!in.is_object()) return InvalidArgument("expected a JSON object, got " + DescribeJson(in));
  if (args.decode) {
    const nlohmann::json* ids = JsonMember(in, "ids");
    if (ids == nullptr) return InvalidArgument("expected \"ids\" (a list of token ids)");
    DSCALE_ASSIGN_OR_RETURN(const std::vector<int32_t> list, ReadTokenIdList(*ids));
    return DecodeToJson(tokenizer, list, args.skip_special);
  }
  const nlohmann::json* text = JsonMember(in, "text");
  if (text == nullptr) return InvalidArgument("expected \"text\" (string)");
  DSCALE_ASSIGN_OR_RETURN(std::string contents, ReadJsonString(*text, "\"text\""));
  bool chat = args.chat;
  if (const nlohmann::json* field = JsonMember(in, "chat")) {
    DSCALE_ASSIGN_OR_RETURN(const bool line_chat, ReadJsonBool(*field, "\"chat\""));
    chat = chat || line_chat;
  }
  return EncodeToJson(tokenizer, std::move(contents), chat);
}

// A result line for every non-empty line of --jsonl, in order; stops at the first bad line,
// named as PATH:LINE (as `generate --prompts` names its lines).
int RunJsonl(const Tokenizer& tokenizer, const TokenizeArgs& args) {
  Result<std::string> contents = ReadFileToString(args.jsonl);
  if (!contents.ok()) return Fail(kRuntimeError, contents.status().message());
  std::istringstream file(*contents);
  std::string line;
  for (int line_number = 1; std::getline(file, line); ++line_number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Result<nlohmann::json> doc = RunJsonlLine(tokenizer, args, line);
    if (!doc.ok()) {
      const Status where = doc.status().WithContext(args.jsonl + ":" + std::to_string(line_number));
      return Fail(kRuntimeError, where.message());
    }
    PrintJson(*doc);
  }
  return 0;
}

int RunTokenize(const TokenizeArgs& args) {
  if (const std::string problem = UsageProblem(args); !problem.empty()) {
    return Fail(kUsageError, problem);
  }
  Result<Tokenizer> tokenizer = Tokenizer::Load(args.tokenizer_dir);
  if (!tokenizer.ok()) return Fail(kRuntimeError, tokenizer.status().message());
  if (args.has_jsonl) return RunJsonl(*tokenizer, args);
  return args.decode ? RunDecode(*tokenizer, args) : RunEncode(*tokenizer, args);
}

}  // namespace

void RegisterTokenizeCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Encode text to token ids, or decode ids");
  cmd->add_option("--tokenizer", args->tokenizer_dir,
                  "Folder with tokenizer.json, or vocab.json + merges.txt (required)")
      ->type_name("DIR");
  CLI::Option* text = cmd->add_option("--text", args->text, "Text to encode")->type_name("S");
  CLI::Option* file =
      cmd->add_option("--file", args->file, "File whose contents to encode")->type_name("F");
  CLI::Option* ids =
      cmd->add_option("--ids", args->ids, "Comma-separated ids to decode")->type_name("1,2,3");
  CLI::Option* jsonl =
      cmd->add_option("--jsonl", args->jsonl,
                      "Many at once: a JSON object per line, {\"text\": S} (and \"chat\": true "
                      "for the chat format) or, with --decode, {\"ids\": [...]}; prints a "
                      "result line for each")
          ->type_name("F");
  cmd->add_flag("--decode", args->decode, "Decode --ids (or --jsonl's ids) to text");
  cmd->add_flag("--chat", args->chat,
                "Format the text as one user turn of Qwen3's chat template (thinking off, with "
                "the generation prompt) before encoding");
  cmd->add_flag("--skip-special", args->skip_special, "With --decode: leave out special tokens");
  cmd->callback([args, exit_code, text, file, ids, jsonl] {
    args->has_text = text->count() > 0;
    args->has_file = file->count() > 0;
    args->has_ids = ids->count() > 0;
    args->has_jsonl = jsonl->count() > 0;
    *exit_code = RunTokenize(*args);
  });
}

}  // namespace dscale::cli
