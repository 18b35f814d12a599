#include "prompt_input.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_util.h"
#include "io/file_util.h"
#include "io/json_util.h"
#include "io/tokenizer/chat_template.h"

namespace dscale::cli {
namespace {

Result<std::vector<int32_t>> EncodeText(const std::string& text, bool raw,
                                        const Tokenizer& tokenizer) {
  if (raw) return tokenizer.Encode(text);
  const ChatMessage message{.role = "user", .content = text};
  DSCALE_ASSIGN_OR_RETURN(std::string formatted,
                          ApplyChatTemplate(ChatFormatOf(tokenizer), std::span(&message, 1)));
  return tokenizer.Encode(formatted);
}

Result<std::vector<int32_t>> EncodeMessages(const nlohmann::json& messages,
                                            const Tokenizer& tokenizer) {
  std::vector<ChatMessage> chat;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string where = "\"messages\"[" + std::to_string(i) + "]";
    const nlohmann::json& m = messages[i];
    if (!m.is_object()) {
      return InvalidArgument(where + ": expected an object, got " + DescribeJson(m));
    }
    const nlohmann::json* role = JsonMember(m, "role");
    const nlohmann::json* content = JsonMember(m, "content");
    if (role == nullptr || content == nullptr) {
      return InvalidArgument(where + ": expected string \"role\" and \"content\"");
    }
    ChatMessage message;
    DSCALE_ASSIGN_OR_RETURN(message.role, ReadJsonString(*role, where + ".role"));
    DSCALE_ASSIGN_OR_RETURN(message.content, ReadJsonString(*content, where + ".content"));
    chat.push_back(std::move(message));
  }
  DSCALE_ASSIGN_OR_RETURN(std::string formatted, ApplyChatTemplate(ChatFormatOf(tokenizer), chat));
  return tokenizer.Encode(formatted);
}

}  // namespace

Result<std::vector<int32_t>> ReadTokenIdList(const nlohmann::json& ids) {
  if (!ids.is_array()) {
    return InvalidArgument("\"ids\": expected a list of token ids, got " + DescribeJson(ids));
  }
  std::vector<int32_t> list;
  for (size_t i = 0; i < ids.size(); ++i) {
    DSCALE_ASSIGN_OR_RETURN(
        const int32_t id, ReadJsonIntAs<int32_t>(ids[i], "\"ids\"[" + std::to_string(i) + "]", 0));
    list.push_back(id);
  }
  return list;
}

namespace {

Result<std::vector<int32_t>> ParseLine(const std::string& line, bool raw,
                                       const Tokenizer* tokenizer) {
  DSCALE_ASSIGN_OR_RETURN(const nlohmann::json j, ParseJsonDocument(line));
  if (!j.is_object()) return InvalidArgument("expected a JSON object, got " + DescribeJson(j));
  if (const nlohmann::json* ids_field = JsonMember(j, "ids")) return ReadTokenIdList(*ids_field);
  if (tokenizer == nullptr) {
    return InvalidArgument(
        "text prompts need a tokenizer (--tokenizer, or tokenizer files in "
        "the target folder)");
  }
  if (const nlohmann::json* messages = JsonMember(j, "messages")) {
    if (!messages->is_array()) {
      return InvalidArgument("\"messages\": expected a list, got " + DescribeJson(*messages));
    }
    return EncodeMessages(*messages, *tokenizer);
  }
  if (const nlohmann::json* prompt = JsonMember(j, "prompt")) {
    DSCALE_ASSIGN_OR_RETURN(const std::string text, ReadJsonString(*prompt, "\"prompt\""));
    return EncodeText(text, raw, *tokenizer);
  }
  return InvalidArgument("expected \"prompt\" (string), \"messages\" (list) or \"ids\" (list)");
}

// A --prompts file is read whole: a regular file (not a FIFO or a device) of bounded size.
constexpr size_t kMaxPromptFileBytes = size_t{256} << 20;

Result<std::vector<std::vector<int32_t>>> LoadPromptFile(const std::string& path, bool raw,
                                                         const Tokenizer* tokenizer) {
  Result<std::string> text = ReadFileToString(path, kMaxPromptFileBytes);
  if (!text.ok()) return text.status().WithContext("--prompts");
  std::istringstream file(*text);
  std::vector<std::vector<int32_t>> prompts;
  std::string line;
  for (int line_number = 1; std::getline(file, line); ++line_number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Result<std::vector<int32_t>> ids = ParseLine(line, raw, tokenizer);
    if (!ids.ok()) {
      return ids.status().WithContext(path + ":" + std::to_string(line_number));
    }
    prompts.push_back(std::move(ids).value());
  }
  if (prompts.empty()) return InvalidArgument("--prompts: " + path + " holds no prompts");
  return prompts;
}

}  // namespace

Result<std::vector<std::vector<int32_t>>> LoadPrompts(const PromptFlags& flags,
                                                      const Tokenizer* tokenizer) {
  const int sources = !flags.ids.empty() + !flags.prompt.empty() + !flags.prompts_file.empty();
  if (sources != 1) return InvalidArgument("give exactly one of --ids, --prompt, --prompts");
  if (!flags.ids.empty()) {
    DSCALE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, ParseIdList(flags.ids, "--ids"));
    return std::vector<std::vector<int32_t>>{std::move(ids)};
  }
  if (!flags.prompts_file.empty()) return LoadPromptFile(flags.prompts_file, flags.raw, tokenizer);
  if (tokenizer == nullptr) {
    return InvalidArgument(
        "--prompt needs a tokenizer (--tokenizer, or tokenizer files in the "
        "target folder)");
  }
  DSCALE_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                          EncodeText(flags.prompt, flags.raw, *tokenizer));
  return std::vector<std::vector<int32_t>>{std::move(ids)};
}

Result<std::optional<Tokenizer>> LoadOptionalTokenizer(const std::string& dir,
                                                       const std::string& target_dir,
                                                       int64_t vocab_size) {
  std::string folder = dir;
  if (folder.empty()) {
    const std::filesystem::path target(target_dir);
    if (!std::filesystem::exists(target / "vocab.json") &&
        !std::filesystem::exists(target / "tokenizer.json")) {
      return std::optional<Tokenizer>();
    }
    folder = target_dir;
  }
  DSCALE_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::Load(folder));
  DSCALE_RETURN_IF_ERROR(tokenizer.CheckFitsVocabulary(vocab_size));
  return std::optional<Tokenizer>(std::move(tokenizer));
}

}  // namespace dscale::cli
