#include "io/tokenizer/stream_decoder.h"

#include "io/tokenizer/utf8.h"

namespace dscale {

Status StreamDecoder::Push(int32_t id, std::string* out) {
  const std::string* bytes = tokenizer_->TokenBytes(id);
  if (bytes == nullptr) {
    return InvalidArgument("token id " + std::to_string(id) + " is not in the vocabulary");
  }
  if (options_.skip_special && tokenizer_->IsSpecial(id)) return Status::Ok();
  pending_ += *bytes;
  size_t pos = 0;
  while (pos < pending_.size()) {
    const utf8::Step step = utf8::Read(pending_, pos);
    if (step.truncated) break;  // may still be completed by the next token
    if (step.valid) {
      out->append(pending_, pos, step.length);
    } else {
      utf8::AppendCodePoint(utf8::kReplacementCharacter, out);
    }
    pos += step.length;
  }
  pending_.erase(0, pos);
  return Status::Ok();
}

void StreamDecoder::Finish(std::string* out) {
  utf8::AppendLossy(pending_, out);
  pending_.clear();
}

}  // namespace dscale
