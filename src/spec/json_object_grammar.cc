#include "spec/json_object_grammar.h"

namespace dscale {
namespace {

constexpr std::string_view kLiterals[] = {"true", "false", "null"};
constexpr std::string_view kReasoningEnd = "</think>";

bool IsSpace(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }
bool IsDigit(uint8_t b) { return b >= '0' && b <= '9'; }
bool IsHex(uint8_t b) { return IsDigit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }

}  // namespace

bool JsonObjectGrammar::Feed(std::string_view bytes) {
  for (const char c : bytes) {
    if (!Feed(static_cast<uint8_t>(c))) return false;
  }
  return true;
}

bool JsonObjectGrammar::IsPlainStringText(std::string_view bytes) {
  for (const char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    if (b == '"' || b == '\\' || b < 0x20) return false;
  }
  return true;
}

JsonObjectGrammar::Key JsonObjectGrammar::key() const {
  // lex_ < 32, depth_ ≤ 64, aux_ < 8, literal_ ≤ 4, spaces_ ≤ 48: 5 + 7 + 3 + 3 + 6 bits.
  return {.stack = stack_,
          .rest = static_cast<uint32_t>(lex_) | (static_cast<uint32_t>(depth_) << 5) |
                  (static_cast<uint32_t>(aux_) << 12) | (static_cast<uint32_t>(literal_) << 15) |
                  (static_cast<uint32_t>(spaces_) << 18)};
}

JsonObjectGrammar JsonObjectGrammar::AfterReasoning() {
  JsonObjectGrammar g;
  g.lex_ = Lex::kReasoning;
  return g;
}

bool JsonObjectGrammar::Feed(uint8_t byte) {
  switch (lex_) {
    case Lex::kDead:
      return false;
    case Lex::kReasoning:
      // "</think>" repeats no prefix of itself but its "<": a mismatch restarts at 0 or 1.
      if (byte == static_cast<uint8_t>(kReasoningEnd[aux_])) {
        if (++aux_ == kReasoningEnd.size()) {
          lex_ = Lex::kAnswerStart;
          aux_ = 0;
        }
      } else {
        aux_ = byte == '<' ? 1 : 0;
      }
      return true;
    case Lex::kString:
      if (byte == '"') {
        if (aux_ == 1) {
          lex_ = Lex::kColon;
          aux_ = 0;
        } else {
          AfterValue();
        }
        return true;
      }
      if (byte == '\\') {
        lex_ = Lex::kEscape;
        return true;
      }
      return byte >= 0x20 || Kill();
    case Lex::kEscape:
      if (byte == 'u') {
        lex_ = Lex::kUnicode;
        literal_ = 4;
        return true;
      }
      if (byte == '"' || byte == '\\' || byte == '/' || byte == 'b' || byte == 'f' || byte == 'n' ||
          byte == 'r' || byte == 't') {
        lex_ = Lex::kString;
        return true;
      }
      return Kill();
    case Lex::kUnicode:
      if (!IsHex(byte)) return Kill();
      if (--literal_ == 0) lex_ = Lex::kString;
      return true;
    case Lex::kMinus:
      if (byte == '0') {
        lex_ = Lex::kZero;
        return true;
      }
      if (IsDigit(byte)) {
        lex_ = Lex::kInt;
        return true;
      }
      return Kill();
    case Lex::kInt:
      if (IsDigit(byte)) return true;
      [[fallthrough]];
    case Lex::kZero:  // no digit may follow a leading zero
      if (byte == '.') {
        lex_ = Lex::kFracStart;
        return true;
      }
      if (byte == 'e' || byte == 'E') {
        lex_ = Lex::kExpStart;
        return true;
      }
      return EndNumber(byte);
    case Lex::kFracStart:
      if (!IsDigit(byte)) return Kill();
      lex_ = Lex::kFrac;
      return true;
    case Lex::kFrac:
      if (IsDigit(byte)) return true;
      if (byte == 'e' || byte == 'E') {
        lex_ = Lex::kExpStart;
        return true;
      }
      return EndNumber(byte);
    case Lex::kExpStart:
      if (byte == '+' || byte == '-') {
        lex_ = Lex::kExpSign;
        return true;
      }
      if (!IsDigit(byte)) return Kill();
      lex_ = Lex::kExp;
      return true;
    case Lex::kExpSign:
      if (!IsDigit(byte)) return Kill();
      lex_ = Lex::kExp;
      return true;
    case Lex::kExp:
      if (IsDigit(byte)) return true;
      return EndNumber(byte);
    case Lex::kLiteral: {
      const std::string_view literal = kLiterals[literal_];
      if (byte != static_cast<uint8_t>(literal[aux_])) return Kill();
      if (++aux_ == literal.size()) AfterValue();
      return true;
    }
    default:
      return FeedStructural(byte);
  }
}

// The states between tokens: whitespace, punctuation, the start of a value.
bool JsonObjectGrammar::FeedStructural(uint8_t byte) {
  if (IsSpace(byte)) {
    if (lex_ == Lex::kStart || lex_ == Lex::kDone || spaces_ == kMaxJsonWhitespaceRun) {
      return Kill();
    }
    ++spaces_;
    return true;
  }
  spaces_ = 0;
  switch (lex_) {
    case Lex::kStart:
    case Lex::kAnswerStart:
      return byte == '{' ? Open(/*object=*/true) : Kill();
    case Lex::kValue:
      return StartValue(byte);
    case Lex::kArrayFirst:
      return byte == ']' ? Close(/*object=*/false) : StartValue(byte);
    case Lex::kObjectFirst:
      if (byte == '}') return Close(/*object=*/true);
      [[fallthrough]];
    case Lex::kKey:
      if (byte != '"') return Kill();
      lex_ = Lex::kString;
      aux_ = 1;
      return true;
    case Lex::kColon:
      if (byte != ':') return Kill();
      lex_ = Lex::kValue;
      return true;
    case Lex::kAfter:
      if (byte == ',') {
        lex_ = TopIsObject() ? Lex::kKey : Lex::kValue;
        return true;
      }
      if (byte == '}' || byte == ']') return Close(/*object=*/byte == '}');
      return Kill();
    default:  // kDone: nothing
      return Kill();
  }
}

bool JsonObjectGrammar::StartValue(uint8_t byte) {
  switch (byte) {
    case '{':
      return Open(/*object=*/true);
    case '[':
      return Open(/*object=*/false);
    case '"':
      lex_ = Lex::kString;
      aux_ = 0;
      return true;
    case '-':
      lex_ = Lex::kMinus;
      return true;
    case '0':
      lex_ = Lex::kZero;
      return true;
    case 't':
    case 'f':
    case 'n':
      lex_ = Lex::kLiteral;
      literal_ = byte == 't' ? 0 : byte == 'f' ? 1 : 2;
      aux_ = 1;
      return true;
    default:
      if (byte >= '1' && byte <= '9') {
        lex_ = Lex::kInt;
        return true;
      }
      return Kill();
  }
}

bool JsonObjectGrammar::Open(bool object) {
  if (depth_ == kMaxJsonDepth) return Kill();
  if (object) {
    stack_ |= uint64_t{1} << depth_;
  } else {
    stack_ &= ~(uint64_t{1} << depth_);
  }
  ++depth_;
  lex_ = object ? Lex::kObjectFirst : Lex::kArrayFirst;
  return true;
}

bool JsonObjectGrammar::Close(bool object) {
  if (depth_ == 0 || TopIsObject() != object) return Kill();
  --depth_;
  stack_ &= ~(uint64_t{1} << depth_);  // a key sees only the open levels
  AfterValue();
  return true;
}

void JsonObjectGrammar::AfterValue() {
  lex_ = depth_ == 0 ? Lex::kDone : Lex::kAfter;
  aux_ = 0;
  literal_ = 0;
}

// A complete number ends at the first byte that is not its own, which the state after it reads.
bool JsonObjectGrammar::EndNumber(uint8_t byte) {
  AfterValue();
  return FeedStructural(byte);
}

}  // namespace dscale
