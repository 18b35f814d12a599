// dscale tokenize: the tokenizer from the command line, for tests and debugging.
//   dscale tokenize --tokenizer DIR --text "Hello world"      -> {"ids":[9707,1879]}
//   dscale tokenize --tokenizer DIR --file prompt.txt --chat  -> ids of the chat-formatted turn
//   dscale tokenize --tokenizer DIR --decode --ids 9707,1879  -> {"text":"Hello world"}

#include <charconv>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "core/status.h"
#include "io/file_util.h"
#include "io/tokenizer/bpe_vocab.h"
#include "io/tokenizer/chat_template.h"
#include "io/tokenizer/tokenizer.h"
#include "io/tokenizer/utf8.h"

namespace dscale::cli {
namespace {

struct TokenizeArgs {
  std::string tokenizer_dir;
  std::string text;
  std::string file;
  std::string ids;
  bool decode = false;
  bool chat = false;
  bool skip_special = false;
  // Which options were given (an empty --text is still a text).
  bool has_text = false, has_file = false, has_ids = false;
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

int RunDecode(const Tokenizer& tokenizer, const TokenizeArgs& args) {
  Result<std::vector<int32_t>> ids = ParseIds(args.ids);
  if (!ids.ok()) return Fail(kUsageError, ids.status().message());
  Result<std::string> text =
      tokenizer.Decode(*ids, DecodeOptions{.skip_special = args.skip_special});
  if (!text.ok()) return Fail(kRuntimeError, text.status().message());
  // JSON strings must be valid UTF-8; ids that cut a character show U+FFFD there.
  PrintJson({{"text", utf8::ToValidUtf8(*text)}});
  return 0;
}

int RunEncode(const Tokenizer& tokenizer, const TokenizeArgs& args) {
  std::string text = args.text;
  if (args.has_file) {
    Result<std::string> contents = ReadFileToString(args.file);
    if (!contents.ok()) return Fail(kRuntimeError, contents.status().message());
    text = std::move(contents).value();
  }
  if (args.chat) {
    const ChatMessage turn{.role = "user", .content = text};
    Result<std::string> formatted = ApplyChatTemplate(ChatFormatOf(tokenizer), {&turn, 1});
    if (!formatted.ok()) return Fail(kRuntimeError, formatted.status().message());
    text = std::move(formatted).value();
  }
  Result<std::vector<int32_t>> ids = tokenizer.Encode(text);
  if (!ids.ok()) return Fail(kRuntimeError, ids.status().message());
  PrintJson({{"ids", *ids}});
  return 0;
}

int RunTokenize(const TokenizeArgs& args) {
  if (const std::string problem = UsageProblem(args); !problem.empty()) {
    return Fail(kUsageError, problem);
  }
  Result<Tokenizer> tokenizer = Tokenizer::Load(args.tokenizer_dir);
  if (!tokenizer.ok()) return Fail(kRuntimeError, tokenizer.status().message());
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
  cmd->add_flag("--decode", args->decode, "Decode --ids to text");
  cmd->add_flag("--chat", args->chat,
                "Format the text as one user turn of Qwen3's chat template (thinking off, with "
                "the generation prompt) before encoding");
  cmd->add_flag("--skip-special", args->skip_special, "With --decode: leave out special tokens");
  cmd->callback([args, exit_code, text, file, ids] {
    args->has_text = text->count() > 0;
    args->has_file = file->count() > 0;
    args->has_ids = ids->count() > 0;
    *exit_code = RunTokenize(*args);
  });
}

}  // namespace dscale::cli
