#include "spec/json_grammar.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/check.h"

namespace dscale {
namespace {

using Kind = JsonSchemaNode::Kind;

bool IsSpace(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }
bool IsDigit(uint8_t b) { return b >= '0' && b <= '9'; }
bool IsHex(uint8_t b) { return IsDigit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }

SchemaBound Pow10(int n) {
  SchemaBound p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

// How much of `marker` the text ends with after one more byte, from `matched`: after a
// mismatch, the longest prefix of the marker that the text still ends with (its borders found by
// comparison: markers are a few bytes, and the walk meets a partial match rarely).
size_t MarkerProgress(std::string_view marker, size_t matched, uint8_t byte) {
  while (byte != static_cast<uint8_t>(marker[matched])) {
    if (matched == 0) return 0;
    size_t border = matched - 1;
    while (border > 0 && marker.substr(0, border) != marker.substr(matched - border, border)) {
      --border;
    }
    matched = border;
  }
  return matched + 1;
}

template <typename T>
void Append(std::string* out, const T& value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

}  // namespace

JsonGrammar::JsonGrammar(const JsonSchema& schema)
    : schema_(&schema), node_(static_cast<uint16_t>(schema.root())), lex_(Lex::kStart) {
  if (Node(node_).kind == Kind::kText) lex_ = Lex::kText;  // its start state, pos_ 0
  if (Node(node_).kind == Kind::kCalls) StartFreeText();
  if (!Closers().empty()) closer_lead_ = static_cast<uint8_t>(Closers()[0][0]);
}

JsonGrammar& JsonGrammar::operator=(const JsonGrammar& other) {
  schema_ = other.schema_;
  reasoning_end_ = other.reasoning_end_;
  choices_ = other.choices_;
  node_ = other.node_;
  pos_ = other.pos_;
  fraction_ = other.fraction_;
  fraction_digits_ = other.fraction_digits_;
  lex_ = other.lex_;
  depth_ = other.depth_;
  aux_ = other.aux_;
  spaces_ = other.spaces_;
  closer_pos_ = other.closer_pos_;
  closer_set_ = other.closer_set_;
  closer_lead_ = other.closer_lead_;
  std::copy_n(other.frames_.begin(), depth_, frames_.begin());
  unique_open_ = other.unique_open_;
  std::copy_n(other.used_.begin(), unique_open_, used_.begin());
  return *this;
}

JsonGrammar JsonGrammar::Start(const JsonSchema& schema, std::string_view reasoning_end) {
  JsonGrammar g(schema);
  if (reasoning_end.empty()) return g;
  DSCALE_CHECK(reasoning_end.size() < 256);
  g.reasoning_end_ = reasoning_end;
  g.lex_ = Lex::kReasoning;
  return g;
}

// Matches the end of the reasoning as the text streams.
bool JsonGrammar::FeedReasoning(uint8_t byte) {
  const size_t matched = MarkerProgress(reasoning_end_, aux_, byte);
  aux_ = static_cast<uint8_t>(matched);
  if (matched < reasoning_end_.size()) return true;
  aux_ = 0;
  // A pattern's text is all that follows the marker; a JSON value may follow whitespace.
  switch (Node(node_).kind) {
    case Kind::kText:
      lex_ = Lex::kText;
      break;
    case Kind::kCalls:
      StartFreeText();
      break;
    default:
      lex_ = Lex::kAnswerStart;
  }
  return true;
}

void JsonGrammar::StartFreeText(bool after_call) {
  const CallSyntax& syntax = schema_->call_syntax();
  lex_ = syntax.whole_answer             ? Lex::kCallStart
         : after_call && syntax.one_call ? Lex::kFreeAfterCall
                                         : Lex::kFree;
  aux_ = 0;
  pos_ = 0;
  spaces_ = 0;
}

void JsonGrammar::OpenCall() {
  const auto call = static_cast<uint16_t>(Node(schema_->root()).values);
  if (xml()) {
    const size_t functions = schema_->xml_tags(call).size();
    ExpectXmlTags(call, functions == 64 ? ~uint64_t{0} : (uint64_t{1} << functions) - 1);
    return;
  }
  lex_ = Lex::kAnswerStart;
  node_ = call;
  aux_ = 0;
  spaces_ = 0;
}

void JsonGrammar::ExpectXmlTags(uint16_t node, uint64_t choices) {
  lex_ = Lex::kXmlTag;
  node_ = node;
  choices_ = choices;
  pos_ = 0;
  aux_ = 0;
  spaces_ = 0;
}

void JsonGrammar::ExpectParameterTags() {
  const uint16_t arguments = frames_[0].node;
  const size_t close = schema_->xml_tags(arguments).size() - 1;  // "</function>"
  ExpectXmlTags(arguments, KeyChoices() | (MayClose() ? uint64_t{1} << close : 0));
}

// The tags are prefix-free (a name or key holds no ">", a value no "</parameter>"): the first
// one whole is the only one left. Whitespace may come before a function's or a parameter's.
bool JsonGrammar::FeedXmlTag(uint8_t byte) {
  const std::vector<std::string>& tags = schema_->xml_tags(node_);
  if (pos_ == 0 && IsSpace(byte) && Node(node_).kind != Kind::kLiterals) {
    return spaces_++ < kMaxJsonWhitespaceRun || Kill();
  }
  uint64_t next = 0;
  for (uint64_t c = choices_; c != 0; c &= c - 1) {
    const int i = std::countr_zero(c);
    if (pos_ < tags[i].size() && static_cast<uint8_t>(tags[i][pos_]) == byte) {
      next |= uint64_t{1} << i;
    }
  }
  if (next == 0) return Kill();
  choices_ = next;
  ++pos_;
  spaces_ = 0;
  const int i = std::countr_zero(next);
  return tags[i].size() != pos_ || EndXmlTag(i);
}

bool JsonGrammar::EndXmlTag(int i) {
  const JsonSchemaNode& n = Node(node_);
  if (node_ == Node(schema_->root()).values) {  // "<function=NAME>"
    const int32_t arguments = schema_->xml_arguments(i);
    if (arguments < 0) {
      lex_ = Lex::kXmlFreeBody;
      aux_ = 0;
      return true;
    }
    frames_[0] = {.node = static_cast<uint16_t>(arguments), .count = 0, .next = 0};
    depth_ = 1;
    ExpectParameterTags();
    return true;
  }
  if (n.kind == Kind::kLiterals) {  // an enum's value, and its "</parameter>"
    ExpectParameterTags();
    return true;
  }
  if (static_cast<size_t>(i) == n.properties.size()) {  // "</function>"
    depth_ = 0;
    lex_ = Lex::kCallClose;
    node_ = 0;
    choices_ = 0;
    pos_ = 0;
    return true;
  }
  frames_[0].next = static_cast<uint8_t>(i + 1);
  const auto value = static_cast<uint16_t>(n.properties[static_cast<size_t>(i)].node);
  if (const size_t literals = schema_->xml_tags(value).size(); literals > 0) {
    ExpectXmlTags(value, literals == 64 ? ~uint64_t{0} : (uint64_t{1} << literals) - 1);
    return true;
  }
  choices_ = 0;
  pos_ = 0;
  aux_ = 0;
  spaces_ = 0;
  if (schema_->xml_text(value)) {
    lex_ = Lex::kXmlText;
    node_ = 0;
    return true;
  }
  lex_ = Lex::kValue;  // its JSON, whitespace around it
  node_ = value;
  return true;
}

// A string argument's text ends at the first "</parameter>" and may hold no other closer.
bool JsonGrammar::FeedXmlText(uint8_t byte) {
  const int closer = MatchCloser(byte);
  if (closer < 0) return true;
  if (closer > 0) return Kill();
  ExpectParameterTags();
  return true;
}

bool JsonGrammar::in_call_value() const {
  switch (lex_) {
    case Lex::kStart:
    case Lex::kReasoning:
    case Lex::kDone:
    case Lex::kText:
    case Lex::kFree:
    case Lex::kFreeAfterCall:
    case Lex::kCallStart:
    case Lex::kCallClose:
    case Lex::kXmlTag:
    case Lex::kXmlText:
    case Lex::kXmlParamClose:
    case Lex::kXmlFreeBody:
    case Lex::kDead:
      return false;
    default:
      return !Closers().empty();
  }
}

// As MarkerProgress, for several closers at once: none holds their first byte elsewhere, so
// after a mismatch only that byte may begin one.
int JsonGrammar::MatchCloser(uint8_t byte) {
  const std::vector<std::string>& closers = Closers();
  if (closer_pos_ > 0) {
    uint8_t next = 0;
    for (size_t m = 0; m < closers.size(); ++m) {
      if (((closer_set_ >> m) & 1) != 0 && static_cast<uint8_t>(closers[m][closer_pos_]) == byte) {
        next |= static_cast<uint8_t>(1 << m);
      }
    }
    if (next != 0) {
      closer_set_ = next;
      ++closer_pos_;
      const int m = std::countr_zero(next);
      if (closers[static_cast<size_t>(m)].size() != closer_pos_) return -1;
      closer_pos_ = 0;
      closer_set_ = 0;
      return m;
    }
  }
  const bool lead = byte == static_cast<uint8_t>(closers[0][0]);
  closer_pos_ = lead ? 1 : 0;
  closer_set_ = lead ? static_cast<uint8_t>((1 << closers.size()) - 1) : 0;
  return -1;
}

// An argument's JSON is read back after one newline at each end is taken off (a boolean's text
// compared whole): one newline may follow it, no other whitespace.
bool JsonGrammar::FeedXmlParamClose(uint8_t byte) {
  static constexpr std::string_view kClose = "</parameter>";
  if (pos_ == 0 && byte == '\n' && spaces_ == 0) {
    spaces_ = 1;
    return true;
  }
  if (byte != static_cast<uint8_t>(kClose[pos_])) return Kill();
  spaces_ = 0;
  if (++pos_ == kClose.size()) ExpectParameterTags();
  return true;
}

bool JsonGrammar::FeedXmlFreeBody(uint8_t byte) {
  const std::string_view close = schema_->call_syntax().close;
  const size_t matched = MarkerProgress(close, aux_, byte);
  aux_ = static_cast<uint8_t>(matched);
  if (matched == close.size()) StartFreeText(/*after_call=*/true);
  return true;
}

// Any byte; the open marker's last one opens a call (refused after a one_call syntax's call). A
// whole-answer call's free text (an answer that did not begin with one) opens none.
bool JsonGrammar::FeedFree(uint8_t byte) {
  const CallSyntax& syntax = schema_->call_syntax();
  if (syntax.whole_answer) return true;
  const size_t matched = MarkerProgress(syntax.open, aux_, byte);
  aux_ = static_cast<uint8_t>(matched);
  if (matched < syntax.open.size()) return true;
  if (lex_ == Lex::kFreeAfterCall) return Kill();
  OpenCall();
  return true;
}

// Whitespace, then the call's first bytes (the open marker, which are its value's too), or any
// other text, which is then free text.
bool JsonGrammar::FeedCallStart(uint8_t byte) {
  const std::string_view open = schema_->call_syntax().open;
  if (aux_ == 0 && IsSpace(byte) && spaces_ < kMaxJsonWhitespaceRun) {
    ++spaces_;
    return true;
  }
  if (byte != static_cast<uint8_t>(open[aux_])) {
    lex_ = Lex::kFree;
    aux_ = 0;
    spaces_ = 0;
    return true;
  }
  if (++aux_ < open.size()) return true;
  OpenCall();
  return Feed(open);
}

bool JsonGrammar::FeedCallClose(uint8_t byte) {
  const std::string_view close = schema_->call_syntax().close;
  if (pos_ == 0 && IsSpace(byte)) return spaces_++ < kMaxJsonWhitespaceRun || Kill();
  if (byte != static_cast<uint8_t>(close[pos_])) return Kill();
  spaces_ = 0;
  if (++pos_ == close.size()) StartFreeText(/*after_call=*/true);
  return true;
}

bool JsonGrammar::Feed(std::string_view bytes) {
  for (const char c : bytes) {
    if (!Feed(static_cast<uint8_t>(c))) return false;
  }
  return true;
}

bool JsonGrammar::IsPlainStringText(std::string_view bytes) {
  for (const char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    if (b == '"' || b == '\\' || b < 0x20) return false;
  }
  return true;
}

bool JsonGrammar::in_held_string() const {
  return (lex_ == Lex::kString || lex_ == Lex::kEscape || lex_ == Lex::kUnicode) &&
         (aux_ & kKeyString) == 0 && Node(node_).held_string();
}

int64_t JsonGrammar::plain_text_room() const {
  // In a call's value a "<" may begin a closer: plain text leaves the state as it is only without
  // one (JsonTokenMasks walks those that hold one), and not at all while one may be under way.
  if (lex_ != Lex::kString || closer_pos_ != 0) return -1;
  if ((aux_ & kKeyString) != 0 || !Node(node_).held_string()) return kUnboundedRoom;
  const JsonSchemaNode& n = Node(node_);
  if (n.pattern >= 0) return -1;
  return n.max_length == kUnboundedLength ? kUnboundedRoom
                                          : n.max_length - static_cast<int64_t>(choices_);
}

int JsonGrammar::free_text_trigger() const {
  if (aux_ != 0 || closer_pos_ != 0) return kNotFree;
  switch (lex_) {
    case Lex::kReasoning:
      return static_cast<uint8_t>(reasoning_end_[0]);
    case Lex::kFree:
    case Lex::kFreeAfterCall:
      return schema_->call_syntax().whole_answer
                 ? -1
                 : static_cast<uint8_t>(schema_->call_syntax().open[0]);
    case Lex::kXmlText:
      return '<';  // the XML form's closers' first byte
    case Lex::kXmlFreeBody:
      return static_cast<uint8_t>(schema_->call_syntax().close[0]);
    default:
      return kNotFree;
  }
}

int JsonGrammar::CharactersIn(std::string_view bytes) {
  return static_cast<int>(std::count_if(
      bytes.begin(), bytes.end(), [](char c) { return (static_cast<uint8_t>(c) & 0xC0) != 0x80; }));
}

bool JsonGrammar::uses_node() const {
  if (in_held_string()) return true;
  switch (lex_) {
    case Lex::kStart:
    case Lex::kReasoning:
    case Lex::kAnswerStart:
    case Lex::kValue:
    case Lex::kColon:
    case Lex::kChoice:
    case Lex::kXmlTag:
    case Lex::kMinus:
    case Lex::kZero:
    case Lex::kInt:
      return true;
    case Lex::kFracStart:
    case Lex::kFrac:
      return Node(node_).bounded();
    default:
      return false;
  }
}

std::string JsonGrammar::key() const {
  std::string k;
  k.reserve(24 + sizeof(Frame) * depth_);
  Append(&k, schema_ == nullptr ? uint64_t{0} : schema_->id());
  Append(&k, lex_);
  Append(&k, depth_);
  Append(&k, aux_);
  Append(&k, spaces_);
  Append(&k, closer_pos_);
  Append(&k, closer_set_);
  Append(&k, pos_);
  Append(&k, uses_node() ? node_ : uint16_t{0});
  // kChoice's choices, a bounded number's digits so far (0 for any other number), a held
  // string's count.
  Append(&k, lex_ == Lex::kChoice || uses_node() ? choices_ : uint64_t{0});
  Append(&k, fraction_);
  Append(&k, fraction_digits_);
  if (lex_ == Lex::kReasoning) k += reasoning_end_;
  for (int i = 0; i < depth_; ++i) {
    Append(&k, frames_[i].node);
    Append(&k, frames_[i].count);
    Append(&k, frames_[i].next);
  }
  for (int i = 0; i < unique_open_; ++i) Append(&k, used_[i]);
  return k;
}

bool JsonGrammar::Feed(uint8_t byte) {
  // JSON writes a closer's first byte only in a string, where a call's value may not spell one.
  if (closer_lead_ >= 0 && (byte == closer_lead_ || closer_pos_ != 0) && in_call_value() &&
      MatchCloser(byte) >= 0) {
    return Kill();
  }
  switch (lex_) {
    case Lex::kDead:
      return false;
    case Lex::kReasoning:
      return FeedReasoning(byte);
    case Lex::kFree:
    case Lex::kFreeAfterCall:
      return FeedFree(byte);
    case Lex::kCallStart:
      return FeedCallStart(byte);
    case Lex::kCallClose:
      return FeedCallClose(byte);
    case Lex::kXmlTag:
      return FeedXmlTag(byte);
    case Lex::kXmlText:
      return FeedXmlText(byte);
    case Lex::kXmlParamClose:
      return FeedXmlParamClose(byte);
    case Lex::kXmlFreeBody:
      return FeedXmlFreeBody(byte);
    case Lex::kText: {
      const int16_t next = schema_->pattern(Node(node_).pattern).next[pos_][byte];
      if (next == PatternDfa::kNone) return Kill();
      pos_ = static_cast<uint16_t>(next);
      return true;
    }
    case Lex::kString:
      if (byte == '"') return EndString();
      if (byte == '\\') {
        lex_ = Lex::kEscape;
        return !in_held_string() || SomeEscapeFollows() || Kill();
      }
      return (byte >= 0x20 && StringByte(byte)) || Kill();
    case Lex::kEscape:
      return FeedEscape(byte);
    case Lex::kUnicode:
      if (!IsHex(byte)) return Kill();
      // A held string counts characters, and a surrogate's escape (\uD800-\uDFFF) is half of
      // one or of none: refused there.
      if (pos_ == 4 && (byte | 0x20) == 'd' && in_held_string()) aux_ |= kSurrogateLead;
      if (pos_ == 3 && (aux_ & kSurrogateLead) != 0) {
        aux_ &= static_cast<uint8_t>(~kSurrogateLead);
        if (byte == '8' || byte == '9' || (byte | 0x20) >= 'a') return Kill();
      }
      if (--pos_ == 0) lex_ = Lex::kString;
      return true;
    case Lex::kChoice:
      return FeedChoice(byte);
    case Lex::kMinus:
      if (!IsDigit(byte)) return Kill();
      lex_ = byte == '0' ? Lex::kZero : Lex::kInt;
      return TakeDigit(byte);
    case Lex::kInt:
      if (IsDigit(byte)) return TakeDigit(byte);
      [[fallthrough]];
    case Lex::kZero:  // no digit may follow a leading zero
      // An integer ends where a fraction or an exponent would begin (and so refuses them).
      if (Node(node_).kind == Kind::kInteger) return EndNumber(byte);
      if (byte == '.') {
        lex_ = Lex::kFracStart;
        return !Node(node_).bounded() || InBoundsReachable() || Kill();
      }
      if (byte == 'e' || byte == 'E') {
        lex_ = Lex::kExpStart;
        return !Node(node_).bounded() || Kill();  // a bounded number is written without one
      }
      return EndNumber(byte);
    case Lex::kFracStart:
      if (!IsDigit(byte)) return Kill();
      lex_ = Lex::kFrac;
      return TakeFractionDigit(byte);
    case Lex::kFrac:
      if (IsDigit(byte)) return TakeFractionDigit(byte);
      if (byte == 'e' || byte == 'E') {
        lex_ = Lex::kExpStart;
        return !Node(node_).bounded() || Kill();
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
    default:
      return FeedStructural(byte);
  }
}

// A string's closing quote: a map's key is followed by its value; a held string must have its
// length and match its pattern.
bool JsonGrammar::EndString() {
  if ((aux_ & kKeyString) != 0) {
    node_ = static_cast<uint16_t>(TopNode().values);
    lex_ = Lex::kColon;
    aux_ = 0;
    return true;
  }
  const JsonSchemaNode& n = Node(node_);
  if (n.held_string()) {
    const bool whole = n.pattern >= 0 ? schema_->pattern(n.pattern).accepting[pos_] != 0
                                      : static_cast<int64_t>(choices_) >= n.min_length;
    if (!whole) return Kill();
  }
  AfterValue();
  return true;
}

// After a backslash: the byte the escape stands for is the string's (a \u escape in a held
// string counts one character; a pattern's automaton takes no \u escape).
bool JsonGrammar::FeedEscape(uint8_t byte) {
  static constexpr std::string_view kEscapes = "\"\\/bfnrt";
  static constexpr std::string_view kBytes = "\"\\/\b\f\n\r\t";
  lex_ = Lex::kString;
  if (byte == 'u') {
    if (in_held_string() && Node(node_).pattern >= 0) return Kill();
    lex_ = Lex::kUnicode;
    if (!StringByte('u')) return Kill();
    pos_ = 4;
    return true;
  }
  const size_t i = kEscapes.find(static_cast<char>(byte));
  if (i == std::string_view::npos) return Kill();
  return StringByte(static_cast<uint8_t>(kBytes[i])) || Kill();
}

// After a backslash in a held string: whether the character of some escape still fits (its
// length, its pattern), so that no backslash is a dead end.
bool JsonGrammar::SomeEscapeFollows() const {
  for (const char c : std::string_view("\"\\/bfnrtu")) {
    JsonGrammar g = *this;
    if (g.FeedEscape(static_cast<uint8_t>(c))) return true;
  }
  return false;
}

// A byte of a string's value (an escape's, decoded): a held string counts it where it begins a
// character (UTF-8's lead bytes) or walks it through its pattern.
bool JsonGrammar::StringByte(uint8_t byte) {
  if (!in_held_string()) return true;
  const JsonSchemaNode& n = Node(node_);
  if (n.pattern >= 0) {
    const int16_t next = schema_->pattern(n.pattern).next[pos_][byte];
    if (next == PatternDfa::kNone) return false;
    pos_ = static_cast<uint16_t>(next);
    return true;
  }
  if ((byte & 0xC0) == 0x80) return true;
  if (static_cast<int64_t>(choices_) == n.max_length) return false;
  // Without a maximum the count tells nothing more once it reaches the minimum.
  if (n.max_length != kUnboundedLength || static_cast<int64_t>(choices_) < n.min_length) ++choices_;
  return true;
}

// The states between tokens: whitespace, punctuation, the start of a value.
bool JsonGrammar::FeedStructural(uint8_t byte) {
  if (IsSpace(byte)) {
    if (lex_ == Lex::kStart || lex_ == Lex::kDone || spaces_ == kMaxJsonWhitespaceRun) {
      return Kill();
    }
    // Before an XML argument's JSON: one newline (FeedXmlParamClose).
    if (lex_ == Lex::kValue && depth_ == 1 && xml() && (byte != '\n' || spaces_ > 0)) {
      return Kill();
    }
    ++spaces_;
    return true;
  }
  spaces_ = 0;
  switch (lex_) {
    case Lex::kStart:
    case Lex::kAnswerStart:
    case Lex::kValue:
      return StartValue(node_, byte);
    case Lex::kArrayFirst:
      return byte == ']' ? Close(byte) : StartItem(byte);
    case Lex::kItem:
      return StartItem(byte);
    case Lex::kObjectFirst:
      return byte == '}' ? Close(byte) : StartKey(byte);
    case Lex::kKey:
      return StartKey(byte);
    case Lex::kColon:
      if (byte != ':') return Kill();
      lex_ = Lex::kValue;
      return true;
    case Lex::kAfter:
      if (byte == ',') return Comma();
      return Close(byte);
    default:  // kDone: nothing
      return Kill();
  }
}

// A key or an enum value: the choices whose text continues with `byte`. One that is whole ends
// the value there when no longer one is still possible (every text but a number's is
// self-delimiting); a number's ends at the first byte that continues none, which the state after
// it reads.
bool JsonGrammar::FeedChoice(uint8_t byte) {
  const bool key = aux_ == kKeyString;
  const auto text = [&](int i) -> const std::string& {
    return key ? TopNode().properties[i].key : Node(node_).literals[i];
  };
  uint64_t next = 0;
  int whole_before = -1;
  for (uint64_t c = choices_; c != 0; c &= c - 1) {
    const int i = std::countr_zero(c);
    const std::string& t = text(i);
    if (t.size() == pos_) {
      whole_before = i;
    } else if (static_cast<uint8_t>(t[pos_]) == byte) {
      next |= uint64_t{1} << i;
    }
  }
  if (next == 0) {
    if (whole_before < 0) return Kill();
    EndLiteral(whole_before);  // only a literal can be whole before its end is read (a number)
    return Feed(byte);
  }
  choices_ = next;
  ++pos_;
  int whole = -1;
  bool longer = false;
  for (uint64_t c = next; c != 0; c &= c - 1) {
    const int i = std::countr_zero(c);
    if (text(i).size() == pos_) {
      whole = i;
    } else {
      longer = true;
    }
  }
  if (whole < 0 || longer) return true;
  if (!key) {
    EndLiteral(whole);
    return true;
  }
  frames_[depth_ - 1].next = static_cast<uint8_t>(whole + 1);
  node_ = static_cast<uint16_t>(TopNode().properties[whole].node);
  lex_ = Lex::kColon;
  aux_ = 0;
  choices_ = 0;
  pos_ = 0;
  return true;
}

// Literal `i` of node_ closed. In a tagged union's object it is the tag (its only value before
// the tag is read), which picks the alternative the object continues as, past its first property.
void JsonGrammar::EndLiteral(int i) {
  AfterValue();
  if (uint64_t* used = UniqueItemsUsed()) *used |= uint64_t{1} << i;
  if (depth_ == 0 || TopNode().kind != Kind::kTagged) return;
  Frame& f = frames_[depth_ - 1];
  f.node = static_cast<uint16_t>(TopNode().tag_owner[static_cast<size_t>(i)]);
  f.next = 1;
}

bool JsonGrammar::StartValue(int32_t node, uint8_t byte) {
  const int32_t n = schema_->Resolve(node, byte);
  if (n < 0) return Kill();
  switch (Node(n).kind) {
    case Kind::kObject:
    case Kind::kTagged:
    case Kind::kArray:
      if (depth_ == kMaxJsonDepth) return Kill();
      if (Node(n).unique_items) {
        if (unique_open_ == kMaxOpenUniqueArrays) return Kill();
        used_[unique_open_++] = 0;
      }
      frames_[depth_++] = {.node = static_cast<uint16_t>(n), .count = 0, .next = 0};
      lex_ = byte == '{' ? Lex::kObjectFirst : Lex::kArrayFirst;
      return true;
    case Kind::kString:
      node_ = static_cast<uint16_t>(n);
      lex_ = Lex::kString;
      aux_ = 0;
      pos_ = 0;  // a pattern's start
      choices_ = 0;
      return true;
    case Kind::kNumber:
    case Kind::kInteger:
      node_ = static_cast<uint16_t>(n);
      lex_ = byte == '-' ? Lex::kMinus : byte == '0' ? Lex::kZero : Lex::kInt;
      choices_ = 0;
      pos_ = 0;
      fraction_ = 0;
      fraction_digits_ = 0;
      if (!Node(n).bounded()) return true;
      aux_ = byte == '-' ? 1 : 0;
      return byte == '-' ? InBoundsReachable() || Kill() : TakeDigit(byte);
    case Kind::kLiterals:
      node_ = static_cast<uint16_t>(n);
      lex_ = Lex::kChoice;
      aux_ = 0;
      pos_ = 0;
      choices_ = Node(n).literals.size() == 64 ? ~uint64_t{0}
                                               : (uint64_t{1} << Node(n).literals.size()) - 1;
      if (const uint64_t* used = UniqueItemsUsed()) choices_ &= ~*used;  // none written twice
      return FeedChoice(byte);
    default:
      return Kill();
  }
}

uint64_t* JsonGrammar::UniqueItemsUsed() {
  return depth_ > 0 && TopNode().unique_items ? &used_[unique_open_ - 1] : nullptr;
}

uint64_t JsonGrammar::KeyChoices() const {
  const auto& properties = TopNode().properties;
  uint64_t choices = 0;
  for (size_t i = frames_[depth_ - 1].next; i < properties.size(); ++i) {
    choices |= uint64_t{1} << i;
    if (properties[i].required) break;  // none after it may come before it
  }
  return choices;
}

bool JsonGrammar::MayClose() const {
  const JsonSchemaNode& top = TopNode();
  const Frame& f = frames_[depth_ - 1];
  if (top.kind == Kind::kArray) return f.count >= top.min_items;
  return std::none_of(top.properties.begin() + f.next, top.properties.end(),
                      [](const JsonSchemaNode::Property& p) { return p.required; });
}

bool JsonGrammar::StartKey(uint8_t byte) {
  if (byte != '"') return Kill();
  const JsonSchemaNode& top = TopNode();
  if (top.properties.empty()) {
    if (top.values < 0) return Kill();  // only "{}"
    lex_ = Lex::kString;
    aux_ = kKeyString;
    return true;
  }
  const uint64_t choices = KeyChoices();
  if (choices == 0) return Kill();
  lex_ = Lex::kChoice;
  aux_ = kKeyString;
  choices_ = choices;
  pos_ = 1;  // every key's text begins with its quote
  return true;
}

bool JsonGrammar::StartItem(uint8_t byte) {
  const JsonSchemaNode& top = TopNode();
  Frame& f = frames_[depth_ - 1];
  if (f.count >= top.max_items) return Kill();
  // Past the prefix's items and max(min_items, max_items) (at most kMaxSchemaItems) the count
  // tells nothing more.
  const auto prefix = static_cast<int32_t>(top.prefix_items.size());
  const int32_t cap =
      std::max(prefix, top.max_items == kMaxSchemaItems ? top.min_items
                                                        : std::max(top.min_items, top.max_items));
  const int32_t index = f.count;
  f.count = static_cast<uint16_t>(std::min<int32_t>(f.count + 1, cap));
  return StartValue(index < prefix ? top.prefix_items[static_cast<size_t>(index)] : top.values,
                    byte);
}

bool JsonGrammar::Comma() {
  const JsonSchemaNode& top = TopNode();
  if (top.kind == Kind::kArray) {
    if (frames_[depth_ - 1].count >= top.max_items) return Kill();
    lex_ = Lex::kItem;
    return true;
  }
  // An object: a key must be able to follow.
  if (top.properties.empty() ? top.values < 0 : KeyChoices() == 0) return Kill();
  lex_ = Lex::kKey;
  return true;
}

bool JsonGrammar::Close(uint8_t closer) {
  if (depth_ == 0) return Kill();
  const bool object = TopNode().kind != Kind::kArray;
  if (closer != (object ? '}' : ']') || !MayClose()) return Kill();
  if (TopNode().unique_items) --unique_open_;
  --depth_;
  AfterValue();
  return true;
}

void JsonGrammar::AfterValue() {
  // A call's XML argument (the arguments' frame is the first): its "</parameter>".
  lex_ = depth_ == 1 && calls() && xml()                   ? Lex::kXmlParamClose
         : depth_ > 0                                      ? Lex::kAfter
         : calls() && !schema_->call_syntax().whole_answer ? Lex::kCallClose
                                                           : Lex::kDone;
  aux_ = 0;
  node_ = 0;
  pos_ = 0;
  choices_ = 0;
  fraction_ = 0;
  fraction_digits_ = 0;
}

// A complete number ends at the first byte that is not its own, which the state after it reads;
// a bounded number only inside its bounds.
bool JsonGrammar::EndNumber(uint8_t byte) {
  const JsonSchemaNode& n = Node(node_);
  if (n.bounded()) {
    const SchemaBound magnitude = Magnitude();
    if (!Meets(magnitude, magnitude)) return Kill();
  }
  AfterValue();
  return Feed(byte);
}

// A bounded number's next digit before its point: kept in choices_ (pos_ digits so far, aux_ 1
// when negative) while some completion of the digits is still inside the bounds.
bool JsonGrammar::TakeDigit(uint8_t byte) {
  if (!Node(node_).bounded()) return true;
  if (pos_ == kMaxBoundedDigits) return Kill();
  choices_ = choices_ * 10 + (byte - '0');
  ++pos_;
  return InBoundsReachable() || Kill();
}

// After its point: kept in fraction_ (fraction_digits_ of them).
bool JsonGrammar::TakeFractionDigit(uint8_t byte) {
  if (!Node(node_).bounded()) return true;
  if (fraction_digits_ == kBoundFractionDigits) return Kill();
  fraction_ = fraction_ * 10 + (byte - '0');
  ++fraction_digits_;
  return InBoundsReachable() || Kill();
}

// The bounded number written so far, in units of 10^-18, without its sign.
SchemaBound JsonGrammar::Magnitude() const {
  return static_cast<SchemaBound>(choices_) * kBoundUnitsPerOne +
         static_cast<SchemaBound>(fraction_) * Pow10(kBoundFractionDigits - fraction_digits_);
}

// Whether some value of magnitude [a, b] (units, the number's sign applied) is inside the bounds.
bool JsonGrammar::Meets(SchemaBound a, SchemaBound b) const {
  const JsonSchemaNode& n = Node(node_);
  const bool negative = aux_ == 1;
  const SchemaBound least = negative ? -b : a, most = negative ? -a : b;
  return (!n.max_value || least <= *n.max_value) && (!n.min_value || most >= *n.min_value);
}

// Whether the bounded number written so far can still end inside its bounds: as it is, with more
// digits after its point (a number's), or with m more digits before it (magnitudes v·10^m to
// (v + 1)·10^m, up to kMaxBoundedDigits digits in all); after a lone "-", any magnitude. The
// bounds are multiples of the values' step (an integer's, of one), so an interval of values that
// meets them meets them at a value.
bool JsonGrammar::InBoundsReachable() const {
  const bool fractions = Node(node_).kind == Kind::kNumber;
  // What the digits after the point (of `digits` so far) may still add to a magnitude.
  const auto tail = [&](int digits) {
    return fractions ? Pow10(kBoundFractionDigits - digits) - 1 : SchemaBound{0};
  };
  if (pos_ == 0) return Meets(0, Pow10(kMaxBoundedDigits) * kBoundUnitsPerOne - 1);
  if (lex_ == Lex::kFracStart || lex_ == Lex::kFrac) {
    const SchemaBound at = Magnitude();
    return Meets(at, at + tail(fraction_digits_));
  }
  const SchemaBound v = static_cast<SchemaBound>(choices_) * kBoundUnitsPerOne;
  if (Meets(v, v + tail(0))) return true;
  if (choices_ == 0) return false;  // a leading zero is the whole integer part
  SchemaBound p = 1;
  for (int m = 1; pos_ + m <= kMaxBoundedDigits; ++m) {
    p *= 10;
    if (Meets(v * p, (v + kBoundUnitsPerOne) * p - (fractions ? 1 : kBoundUnitsPerOne)))
      return true;
  }
  return false;
}

}  // namespace dscale
