#include "server/responses_output.h"

#include <utility>

#include "core/check.h"

namespace dscale::server {
namespace responses_reply {

ResponseJson UsageJson(const Usage& usage) {
  return {{"input_tokens", usage.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", usage.cached_prompt_tokens}}},
          {"output_tokens", usage.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", usage.reasoning_tokens}}},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

const char* StatusOf(Outcome outcome) {
  switch (outcome) {
    case Outcome::kStop:
      return "completed";
    case Outcome::kLength:
      return "incomplete";
    case Outcome::kError:
      return "failed";
    case Outcome::kCancelled:
      return "cancelled";
  }
  return "failed";
}

}  // namespace responses_reply

ResponsesOutput::ResponsesOutput(ResponseMeta meta, ResponseJson echo, uint64_t id_seed)
    : meta_(std::move(meta)), echo_(std::move(echo)), id_seed_(id_seed) {}

std::string ResponsesOutput::Event(const char* type, ResponseJson fields) {
  ResponseJson event = {{"type", type}};
  for (auto& [key, value] : fields.items()) event[key] = std::move(value);
  event["sequence_number"] = sequence_++;
  return std::string("event: ") + type + "\ndata: " + Dump(event) + "\n\n";
}

ResponseJson ResponsesOutput::ItemRef() const {
  return {{"item_id", output_.back()["id"]}, {"output_index", output_.size() - 1}};
}

std::string ResponsesOutput::Open() {
  std::string out = Event("response.created", {{"response", Reply()}});
  return out + Event("response.in_progress", {{"response", Reply()}});
}

std::string ResponsesOutput::Opened(Kind kind, const ToolCall* call) {
  const size_t index = output_.size();
  const auto id = [&](const char* prefix) {
    return ResponsePartId(prefix, id_seed_, static_cast<int32_t>(index));
  };
  ResponseJson item;
  ResponseJson part;
  if (kind == Kind::kReasoning) {
    item = {{"id", id("rs")},
            {"type", "reasoning"},
            {"summary", ResponseJson::array()},
            {"content", ResponseJson::array()}};
    part = {{"type", "reasoning_text"}, {"text", ""}};
  } else if (kind == Kind::kText) {
    item = {{"id", id("msg")},
            {"type", "message"},
            {"status", "in_progress"},
            {"role", "assistant"},
            {"content", ResponseJson::array()}};
    part = {{"type", "output_text"}, {"text", ""}, {"annotations", ResponseJson::array()}};
    if (meta_.logprobs) part["logprobs"] = ResponseJson::array();
  } else {
    DSCALE_CHECK(kind == Kind::kCall && call != nullptr);
    item = {{"id", id("fc")},      {"type", "function_call"}, {"status", "in_progress"},
            {"call_id", call->id}, {"name", call->call.name}, {"arguments", ""}};
  }
  output_.push_back(item);
  std::string out =
      Event("response.output_item.added", {{"output_index", index}, {"item", std::move(item)}});
  if (kind != Kind::kCall) {
    last_item()["content"].push_back(part);
    ResponseJson fields = ItemRef();
    fields["content_index"] = 0;
    fields["part"] = std::move(part);
    out += Event("response.content_part.added", std::move(fields));
  }
  return out;
}

std::string ResponsesOutput::Text(Kind kind, const std::string& text,
                                  std::span<const LogprobEntry> logprobs) {
  ResponseJson& part = last_item()["content"][0];
  part["text"].get_ref<std::string&>() += text;
  ResponseJson fields = ItemRef();
  fields["content_index"] = 0;
  fields["delta"] = text;
  if (kind == Kind::kText && meta_.logprobs) {
    ResponseJson entries = ChatLogprobsJson(logprobs)["content"];
    for (const ResponseJson& entry : entries) part["logprobs"].push_back(entry);
    fields["logprobs"] = std::move(entries);
  }
  return Event(kind == Kind::kText ? "response.output_text.delta" : "response.reasoning_text.delta",
               std::move(fields));
}

std::string ResponsesOutput::Arguments(const std::string& arguments) {
  last_item()["arguments"].get_ref<std::string&>() += arguments;
  ResponseJson fields = ItemRef();
  fields["delta"] = arguments;
  return Event("response.function_call_arguments.delta", std::move(fields));
}

std::string ResponsesOutput::Closed(Kind kind, bool cut_off) {
  ResponseJson& item = last_item();
  std::string out;
  ResponseJson fields = ItemRef();
  if (kind == Kind::kCall) {
    fields["name"] = item["name"];
    fields["arguments"] = item["arguments"];
    out += Event("response.function_call_arguments.done", std::move(fields));
  } else {
    const ResponseJson& part = item["content"][0];
    fields["content_index"] = 0;
    fields["text"] = part["text"];
    if (kind == Kind::kText && meta_.logprobs) fields["logprobs"] = part["logprobs"];
    out += Event(kind == Kind::kText ? "response.output_text.done" : "response.reasoning_text.done",
                 fields);
    fields.erase("text");
    fields.erase("logprobs");
    fields["part"] = part;
    out += Event("response.content_part.done", std::move(fields));
  }
  if (kind != Kind::kReasoning) item["status"] = cut_off ? "incomplete" : "completed";
  return out +
         Event("response.output_item.done", {{"output_index", output_.size() - 1}, {"item", item}});
}

std::string ResponsesOutput::Finished(const RequestChannel::Update& update) {
  status_ = responses_reply::StatusOf(update.outcome);
  usage_ = update.usage;
  error_ = update.error;
  const char* type = update.outcome == Outcome::kStop     ? "response.completed"
                     : update.outcome == Outcome::kLength ? "response.incomplete"
                                                          : "response.failed";
  return Event(type, {{"response", Reply()}});
}

ResponseJson ResponsesOutput::Reply() const {
  ResponseJson error = nullptr;
  if (error_)
    error = {{"code", error_->code.empty() ? "server_error" : error_->code},
             {"message", error_->message}};
  ResponseJson out = {
      {"id", meta_.id},
      {"object", "response"},
      {"created_at", meta_.created},
      {"status", status_},
      {"background", false},
      {"error", std::move(error)},
      {"incomplete_details", status_ == "incomplete" ? ResponseJson{{"reason", "max_output_tokens"}}
                                                     : ResponseJson(nullptr)},
      {"model", meta_.model},
      {"output", output_}};
  for (const auto& [key, value] : echo_.items()) out[key] = value;
  out["usage"] = usage_ ? responses_reply::UsageJson(*usage_) : ResponseJson(nullptr);
  return out;
}

}  // namespace dscale::server
