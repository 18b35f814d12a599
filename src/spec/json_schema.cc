#include "spec/json_schema.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <unordered_map>

#include "spec/xml_call_tags.h"

namespace dscale {
namespace {

using Json = nlohmann::ordered_json;
using Kind = JsonSchemaNode::Kind;

// The nodes every schema starts with: any value is one of the next five.
constexpr int32_t kAnyValue = 0;
constexpr int32_t kAnyObject = 1;
constexpr int32_t kAnyArray = 2;
constexpr int32_t kAnyString = 3;
constexpr int32_t kAnyNumber = 4;
constexpr int32_t kAnyLiteral = 5;  // true, false, null

// Assertions no compiled schema holds an output to: refused rather than ignored.
constexpr std::string_view kRefused[] = {
    "multipleOf",
    "additionalItems",
    "contains",
    "minContains",
    "maxContains",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "unevaluatedItems",
    "unevaluatedProperties",
    "$dynamicRef",
};
// A number's bounds, held where the schema's types include integer or number.
constexpr std::string_view kNumberBounds[] = {"minimum", "exclusiveMinimum", "maximum",
                                              "exclusiveMaximum"};
// A string's length in characters and its pattern, held where the schema's types include string.
constexpr std::string_view kStringAssertions[] = {"minLength", "maxLength", "pattern"};
// The keywords that say what a value is; only annotations may stand beside $ref, anyOf, oneOf
// and allOf.
constexpr std::string_view kShaping[] = {
    "prefixItems", "type",     "properties", "required", "additionalProperties",
    "items",       "minItems", "maxItems",   "enum",     "const",
    "anyOf",       "oneOf",    "allOf",      "$ref",     "uniqueItems",
};

std::atomic<uint64_t> next_schema_id{1};

// RFC 3339's full-date (days within their month, February 29 in leap years) and full-time (its
// offset required), unanchored.
constexpr std::string_view kFullDate =
    R"re((?:\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30))re"
    R"re(|02-(?:0[1-9]|1\d|2[0-8]))|(?:\d\d(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048])re"
    R"re(|[13579][26])00)-02-29))re";
constexpr std::string_view kFullTime =
    R"re((?:[01]\d|2[0-3]):[0-5]\d:(?:[0-5]\d|60)(?:\.\d+)?(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d))re";

// The pattern a string format is held to, for the formats OpenAI's structured outputs hold and
// a pattern can: RFC 3339's date, time and date-time, RFC 4122's uuid, an e-mail address (a
// dot-atom local part, RFC 5322, at a domain of two or more labels), an IPv4 address in dotted
// decimal. Others (duration, hostname, ipv6, uri, ...) stay annotations.
std::optional<std::string> FormatPattern(std::string_view format) {
  const auto anchored = [](std::string_view a, std::string_view b = "", std::string_view c = "") {
    return "^" + std::string(a) + std::string(b) + std::string(c) + "$";
  };
  if (format == "date") return anchored(kFullDate);
  if (format == "time") return anchored(kFullTime);
  if (format == "date-time") return anchored(kFullDate, "[Tt]", kFullTime);
  if (format == "uuid") {
    return anchored("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}");
  }
  if (format == "email") {
    return anchored(R"re([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@)re",
                    R"re([A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)re",
                    R"re((?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+)re");
  }
  if (format == "ipv4") {
    return anchored(R"re((?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3})re",
                    R"re((?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))re");
  }
  return std::nullopt;
}

// `x` rounded to a multiple of `step`, up or down.
SchemaBound RoundToUnits(SchemaBound x, SchemaBound step, bool up) {
  SchemaBound q = x / step;  // toward zero
  if (q * step != x && (x > 0) == up) q += x > 0 ? 1 : -1;
  return q * step;
}

// A JSON number (at most kMaxSchemaBound in size) in units of 10^-18, rounded up or down where
// it has more digits after the point: its shortest decimal text read exactly.
SchemaBound InUnits(const Json& x, bool up) {
  if (x.is_number_integer()) return static_cast<SchemaBound>(x.get<int64_t>()) * kBoundUnitsPerOne;
  const std::string text = Json(x.get<double>()).dump();  // e.g. "12.5", "1e-05", "-3.25e+14"
  SchemaBound digits = 0;
  int exponent = 0;  // x = ±digits · 10^exponent
  bool point = false;
  size_t i = text[0] == '-' ? 1 : 0;
  for (; i < text.size() && text[i] != 'e' && text[i] != 'E'; ++i) {
    if (text[i] == '.') {
      point = true;
      continue;
    }
    digits = digits * 10 + (text[i] - '0');
    if (point) --exponent;
  }
  if (i < text.size()) exponent += std::stoi(text.substr(i + 1));
  SchemaBound units = text[0] == '-' ? -digits : digits;
  const int shift = exponent + kBoundFractionDigits;
  for (int e = 0; e < shift; ++e) units *= 10;
  if (shift >= 0) return units;
  // Past the units: digits (at most 17 of them) over 10^-shift, where 10^36 is as good as more.
  SchemaBound step = 1;
  for (int e = 0; e < std::min(-shift, 36); ++e) step *= 10;
  return RoundToUnits(units, step, up) / step;
}

bool IsNumberText(std::string_view t) {
  return !t.empty() && (t[0] == '-' || (t[0] >= '0' && t[0] <= '9'));
}
bool IsIntegerText(std::string_view t) {
  return IsNumberText(t) && t.find_first_of(".eE") == std::string_view::npos;
}

std::bitset<256> FirstBytesOf(std::string_view bytes) {
  std::bitset<256> b;
  for (const char c : bytes) b.set(static_cast<uint8_t>(c));
  return b;
}

bool HasType(const Json& value, std::string_view type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "integer") return value.is_number_integer();
  if (type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  return type == "null" && value.is_null();
}

}  // namespace

// Compiles one document; nodes refer to each other by index, so a $ref may point at a node still
// being compiled (recursion).
class JsonSchemaCompiler {
 public:
  JsonSchemaCompiler(const Json& doc, std::string field) : doc_(doc), field_(std::move(field)) {
    AddBuiltins();
  }

  Result<std::shared_ptr<const JsonSchema>> Run() {
    DSCALE_RETURN_IF_ERROR(CompileDocument());
    return std::shared_ptr<const JsonSchema>(std::move(schema_));
  }

  // Free text with calls in it, each a value of the document (whose top is an object).
  Result<std::shared_ptr<const JsonSchema>> Calls(const CallSyntax& syntax) {
    DSCALE_CHECK(!syntax.open.empty() && syntax.open.size() < 256 && syntax.close.size() < 256);
    // A call's value finds its closers by their first byte, which JSON writes only in strings and
    // each holds only there (JsonGrammar::MatchCloser); the XML form's begin with "<".
    DSCALE_CHECK(
        syntax.whole_answer ||
        (!syntax.close.empty() && syntax.close.rfind(syntax.close[0]) == 0 &&
         std::string_view("{}[],:-+.0123456789eEtrufalsn \t\n\r\"\\").find(syntax.close[0]) ==
             std::string_view::npos &&
         (!syntax.xml_parameters || syntax.close[0] == '<')));
    DSCALE_RETURN_IF_ERROR(CompileDocument());
    // A union of objects (a tagged one) is that alternative alone.
    int32_t call = schema_->root_;
    if (nodes()[call].kind == Kind::kUnion && nodes()[call].alternatives.size() == 1) {
      call = nodes()[call].alternatives[0];
    }
    const int32_t calls = New(Kind::kCalls, field_);
    nodes()[calls].values = call;
    nodes()[calls].first_bytes.set();  // any text
    schema_->root_ = calls;
    schema_->call_syntax_ = syntax;
    if (syntax.xml_parameters) {
      schema_->call_closers_ = {"</parameter>", "<parameter=", "</function>"};
      DSCALE_RETURN_IF_ERROR(AddXmlCallTags(*schema_, call, paths_));
    }
    if (!syntax.whole_answer) schema_->call_closers_.push_back(syntax.close);
    return std::shared_ptr<const JsonSchema>(std::move(schema_));
  }

  // The output's whole text held to `regex`, anchored at both ends.
  Result<std::shared_ptr<const JsonSchema>> Text(std::string_view regex) {
    const Result<int32_t> pattern =
        Pattern("^(?:" + std::string(regex) + ")$", 0, kUnboundedLength, field_);
    if (!pattern.ok()) return pattern.status();
    const int32_t root = New(Kind::kText, field_);
    nodes()[root].pattern = *pattern;
    SetFirstBytes(root);
    schema_->root_ = root;
    DSCALE_RETURN_IF_ERROR(Finish());
    return std::shared_ptr<const JsonSchema>(std::move(schema_));
  }

  // Only the built-in nodes: any object at the top.
  std::shared_ptr<const JsonSchema> AnyObject() {
    schema_->root_ = kAnyObject;
    DSCALE_CHECK(Finish().ok());
    return std::shared_ptr<const JsonSchema>(std::move(schema_));
  }

 private:
  std::vector<JsonSchemaNode>& nodes() { return schema_->nodes_; }

  // The document compiled, its top-level value (an object or an array) the root.
  Status CompileDocument() {
    const int32_t slot = New(Kind::kPending, field_);
    refs_["#"] = slot;
    const Result<int32_t> top = Node(doc_, field_);
    if (!top.ok()) return top.status();
    DSCALE_RETURN_IF_ERROR(Fill(slot, *top, field_));
    // A schema admitting any value at the top: JSON mode's any object.
    schema_->root_ = *top == kAnyValue ? kAnyObject : slot;
    DSCALE_RETURN_IF_ERROR(Finish());
    const std::bitset<256> top_bytes = schema_->nodes_[schema_->root_].first_bytes;
    if ((top_bytes & ~FirstBytesOf("{[")).any()) {
      return InvalidArgument(field_ + ": the top-level value must be an object or an array");
    }
    return Status::Ok();
  }

  int32_t New(Kind kind, const std::string& path) {
    JsonSchemaNode n;
    n.kind = kind;
    nodes().push_back(std::move(n));
    paths_.push_back(path);
    return static_cast<int32_t>(nodes().size()) - 1;
  }

  void AddBuiltins() {
    schema_->id_ = next_schema_id.fetch_add(1);
    New(Kind::kUnion, "any value");
    nodes()[kAnyValue].alternatives = {kAnyObject, kAnyArray, kAnyString, kAnyNumber, kAnyLiteral};
    New(Kind::kObject, "any object");
    nodes()[kAnyObject].values = kAnyValue;
    New(Kind::kArray, "any array");
    nodes()[kAnyArray].values = kAnyValue;
    New(Kind::kString, "any string");
    New(Kind::kNumber, "any number");
    New(Kind::kLiterals, "true, false or null");
    nodes()[kAnyLiteral].literals = {"true", "false", "null"};
    for (int32_t i = kAnyObject; i <= kAnyLiteral; ++i) SetFirstBytes(i);
  }

  Status Refuse(const std::string& path, const std::string& why) const {
    return InvalidArgument(path + ": " + why);
  }

  Result<int32_t> Node(const Json& s, const std::string& path) {
    if (nodes().size() >= kMaxSchemaNodes) {
      return Refuse(field_, "more than " + std::to_string(kMaxSchemaNodes) + " schemas");
    }
    if (JsonSchema::AdmitsAnyValue(s)) return kAnyValue;
    if (s.is_boolean()) return Refuse(path, "false admits no value");
    if (!s.is_object()) return Refuse(path, "expected a schema (an object or a boolean)");
    for (const std::string_view key : kRefused) {
      if (s.contains(key)) {
        return Refuse(path + "." + std::string(key),
                      "is not supported (an output could not be held to it)");
      }
    }
    for (const char* combinator : {"$ref", "anyOf", "oneOf", "allOf"}) {
      if (!s.contains(combinator)) continue;
      for (const std::string_view key : kShaping) {
        if (key != combinator && s.contains(key)) {
          return Refuse(path + "." + std::string(key),
                        std::string("is not supported beside ") + combinator);
        }
      }
      if (std::string_view(combinator) == "$ref") return Ref(s["$ref"], path + ".$ref");
      if (std::string_view(combinator) == "allOf") return AllOf(s["allOf"], path + ".allOf");
      return AnyOf(s[combinator], path + "." + combinator,
                   /*exclusive=*/std::string_view(combinator) == "oneOf");
    }
    std::vector<std::string> types;
    if (const auto type = s.find("type"); type != s.end()) {
      DSCALE_RETURN_IF_ERROR(ReadTypes(*type, path + ".type", &types));
    }
    const bool number_keywords = Says(s, kNumberBounds);
    const bool string_keywords = Says(s, kStringAssertions);
    DSCALE_RETURN_IF_ERROR(
        CheckAssertionTypes(s, types, kNumberBounds, {"integer", "number"}, path));
    DSCALE_RETURN_IF_ERROR(CheckAssertionTypes(s, types, kStringAssertions, {"string"}, path));
    if (s.contains("enum") || s.contains("const")) return Literals(s, types, path);
    if (types.empty()) {
      // Not any value (AdmitsAnyValue), no enum, no union: a number's keywords, a string's, an
      // object's or an array's.
      const bool object =
          s.contains("properties") || s.contains("required") || s.contains("additionalProperties");
      types = {number_keywords   ? "number"
               : string_keywords ? "string"
               : object          ? "object"
                                 : "array"};
    }
    // A number admits every integer its bounds admit.
    if (std::find(types.begin(), types.end(), "number") != types.end()) {
      std::erase(types, "integer");
    }
    std::vector<int32_t> alternatives;
    for (const std::string& type : types) {
      const Result<int32_t> n = OfType(s, type, path);
      if (!n.ok()) return n.status();
      alternatives.push_back(*n);
    }
    if (alternatives.size() == 1) return alternatives[0];
    const int32_t u = New(Kind::kUnion, path + ".type");
    nodes()[u].alternatives = std::move(alternatives);
    return u;
  }

  template <size_t N>
  static bool Says(const Json& s, const std::string_view (&keys)[N]) {
    return std::any_of(std::begin(keys), std::end(keys),
                       [&](std::string_view key) { return s.contains(key); });
  }

  // A type's assertions (a number's bounds, a string's length and pattern) apply to values of
  // `of` types: refused beside an enum or a const (which the compiler does not filter) and on a
  // schema none of whose types they apply to.
  template <size_t N>
  Status CheckAssertionTypes(const Json& s, const std::vector<std::string>& types,
                             const std::string_view (&keys)[N],
                             std::initializer_list<std::string_view> of, const std::string& path) {
    const bool applies =
        types.empty() || std::any_of(types.begin(), types.end(), [&](const std::string& t) {
          return std::find(of.begin(), of.end(), t) != of.end();
        });
    for (const std::string_view key : keys) {
      if (s.contains(key) && (!applies || s.contains("enum") || s.contains("const"))) {
        std::string names;
        for (const std::string_view t : of) names += (names.empty() ? "" : " or ") + std::string(t);
        return Refuse(path + "." + std::string(key),
                      "is supported on a schema whose types include " + names + " (without enum)");
      }
    }
    return Status::Ok();
  }

  Status ReadTypes(const Json& v, const std::string& path, std::vector<std::string>* types) {
    static constexpr std::string_view kTypes[] = {"object", "array",   "string", "integer",
                                                  "number", "boolean", "null"};
    const auto read = [&](const Json& t) -> Status {
      if (!t.is_string() || std::find(std::begin(kTypes), std::end(kTypes), t.get<std::string>()) ==
                                std::end(kTypes)) {
        return Refuse(path, "expected object, array, string, integer, number, boolean or null");
      }
      types->push_back(t.get<std::string>());
      return Status::Ok();
    };
    if (!v.is_array()) return read(v);
    if (v.empty()) return Refuse(path, "an empty list admits no value");
    for (const Json& t : v) DSCALE_RETURN_IF_ERROR(read(t));
    return Status::Ok();
  }

  Result<int32_t> OfType(const Json& s, const std::string& type, const std::string& path) {
    if (type == "object") return Object(s, path);
    if (type == "array") return Array(s, path);
    if (type == "string") return String(s, path);
    if (type == "number") return Number(s, path, /*integer=*/false);
    if (type == "integer") return Number(s, path, /*integer=*/true);
    const int32_t n = New(Kind::kLiterals, path);
    nodes()[n].literals = type == "boolean" ? std::vector<std::string>{"true", "false"}
                                            : std::vector<std::string>{"null"};
    SetFirstBytes(n);
    return n;
  }

  // A string, with the length the schema gives it.
  Result<int32_t> String(const Json& s, const std::string& path) {
    int32_t min_length = 0, max_length = kUnboundedLength;
    for (const auto& [key, bound] :
         {std::pair{"minLength", &min_length}, {"maxLength", &max_length}}) {
      const auto it = s.find(key);
      if (it == s.end()) continue;
      if (!it->is_number_integer() || it->get<int64_t>() < 0 ||
          it->get<int64_t>() > kMaxSchemaLength) {
        return Refuse(path + "." + key,
                      "expected an integer from 0 to " + std::to_string(kMaxSchemaLength));
      }
      *bound = static_cast<int32_t>(it->get<int64_t>());
    }
    if (min_length > max_length) return Refuse(path + ".minLength", "is above maxLength");
    // A pattern, else a format held as one (JSON Schema's formats are annotations unless a
    // validator asserts them; OpenAI's structured outputs hold these).
    std::optional<std::string> pattern;
    std::string pattern_path = path + ".pattern";
    if (const auto it = s.find("pattern"); it != s.end()) {
      if (!it->is_string()) return Refuse(pattern_path, "expected a regular expression");
      pattern = it->get<std::string>();
    } else if (const auto format = s.find("format"); format != s.end() && format->is_string()) {
      pattern = FormatPattern(format->get<std::string>());
      pattern_path = path + ".format";
    }
    if (min_length == 0 && max_length == kUnboundedLength && !pattern) return kAnyString;
    const int32_t n = New(Kind::kString, path);
    if (pattern) {
      // The length joins the pattern's automaton, which then holds the string alone.
      const Result<int32_t> p = Pattern(*pattern, min_length, max_length, pattern_path);
      if (!p.ok()) return p.status();
      nodes()[n].pattern = *p;
    } else {
      nodes()[n].min_length = min_length;
      nodes()[n].max_length = max_length;
    }
    SetFirstBytes(n);
    return n;
  }

  // A pattern's automaton, with the string's length in it, kept in the schema: its index.
  Result<int32_t> Pattern(const std::string& pattern, int32_t min_length, int32_t max_length,
                          const std::string& path) {
    Result<PatternDfa> dfa = CompilePattern(pattern);
    if (dfa.ok() && (min_length > 0 || max_length != kUnboundedLength)) {
      dfa = WithLength(
          *dfa, min_length,
          max_length == kUnboundedLength ? std::nullopt : std::optional<int32_t>(max_length));
    }
    if (!dfa.ok()) return Refuse(path, dfa.status().message());
    schema_->patterns_.push_back(std::move(*dfa));
    return static_cast<int32_t>(schema_->patterns_.size()) - 1;
  }

  // A number or an integer, with the bounds the schema gives it, each rounded inwards into the
  // values the grammar writes (units of 10^-18; an integer's, integers).
  Result<int32_t> Number(const Json& s, const std::string& path, bool integer) {
    std::optional<SchemaBound> lo, hi;
    for (const std::string_view key : kNumberBounds) {
      const auto it = s.find(key);
      if (it == s.end()) continue;
      const std::string where = path + "." + std::string(key);
      if (!it->is_number() || !(std::abs(it->get<double>()) <= kMaxSchemaBound)) {
        return Refuse(where, "expected a number of at most 10^15 in size");
      }
      const bool minimum = key == "minimum" || key == "exclusiveMinimum";
      const bool exclusive = key.starts_with("exclusive");
      // The least (greatest) value at the bound's side that the bound admits.
      SchemaBound bound = minimum
                              ? (exclusive ? InUnits(*it, /*up=*/false) + 1 : InUnits(*it, true))
                              : (exclusive ? InUnits(*it, true) - 1 : InUnits(*it, false));
      if (integer) bound = RoundToUnits(bound, kBoundUnitsPerOne, /*up=*/minimum);
      if (minimum) {
        lo = std::max(lo.value_or(bound), bound);
      } else {
        hi = std::min(hi.value_or(bound), bound);
      }
    }
    if (!lo && !hi && !integer) return kAnyNumber;
    if (lo && hi && *lo > *hi) {
      return Refuse(path, integer ? "its bounds admit no integer" : "its bounds admit no number");
    }
    const int32_t n = New(integer ? Kind::kInteger : Kind::kNumber, path);
    nodes()[n].min_value = lo;
    nodes()[n].max_value = hi;
    SetFirstBytes(n);
    return n;
  }

  Result<int32_t> Object(const Json& s, const std::string& path) {
    std::vector<JsonSchemaNode::Property> properties;
    if (const auto props = s.find("properties"); props != s.end()) {
      if (!props->is_object()) return Refuse(path + ".properties", "expected an object");
      if (props->size() > kMaxSchemaChoices) {
        return Refuse(path + ".properties",
                      "more than " + std::to_string(kMaxSchemaChoices) + " properties");
      }
      for (const auto& [name, sub] : props->items()) {
        const Result<int32_t> n = Node(sub, path + ".properties." + name);
        if (!n.ok()) return n.status();
        properties.push_back({.key = Json(name).dump(), .node = *n});
      }
    }
    if (const auto required = s.find("required"); required != s.end()) {
      if (!required->is_array()) return Refuse(path + ".required", "expected a list of names");
      for (const Json& name : *required) {
        if (!name.is_string()) return Refuse(path + ".required", "expected a list of names");
        const std::string key = Json(name).dump();
        const auto p = std::find_if(properties.begin(), properties.end(),
                                    [&](const auto& q) { return q.key == key; });
        if (p == properties.end()) {
          return Refuse(path + ".required", "names " + key + ", which properties does not declare");
        }
        p->required = true;
      }
    }
    int32_t values = -1;
    if (properties.empty()) {
      const auto extra = s.find("additionalProperties");
      if (extra == s.end()) {
        values = kAnyValue;
      } else if (!(extra->is_boolean() && !extra->get<bool>())) {
        const Result<int32_t> n = Node(*extra, path + ".additionalProperties");
        if (!n.ok()) return n.status();
        values = *n;
      }
    }
    const int32_t n = New(Kind::kObject, path);
    nodes()[n].properties = std::move(properties);
    nodes()[n].values = values;
    SetFirstBytes(n);
    return n;
  }

  Result<int32_t> Array(const Json& s, const std::string& path) {
    int32_t items = kAnyValue;
    int32_t min_items = 0, max_items = kMaxSchemaItems;
    std::vector<int32_t> prefix;
    if (const auto it = s.find("prefixItems"); it != s.end()) {
      if (!it->is_array() || it->size() > kMaxSchemaItems) {
        return Refuse(path + ".prefixItems", "expected a list of schemas");
      }
      for (size_t i = 0; i < it->size(); ++i) {
        const Result<int32_t> n = Node((*it)[i], path + ".prefixItems." + std::to_string(i));
        if (!n.ok()) return n.status();
        prefix.push_back(*n);
      }
    }
    if (const auto it = s.find("items"); it != s.end()) {
      if (it->is_array()) {
        return Refuse(path + ".items", "a list of item schemas is not supported (prefixItems is)");
      }
      if (it->is_boolean() && !it->get<bool>()) {
        max_items = static_cast<int32_t>(prefix.size());  // none past the prefix
      } else {
        const Result<int32_t> n = Node(*it, path + ".items");
        if (!n.ok()) return n.status();
        items = *n;
      }
    }
    for (const auto& [key, bound] : {std::pair{"minItems", &min_items}, {"maxItems", &max_items}}) {
      const auto it = s.find(key);
      if (it == s.end()) continue;
      if (!it->is_number_integer() || it->get<int64_t>() < 0 ||
          it->get<int64_t>() > kMaxSchemaItems) {
        return Refuse(path + "." + key,
                      "expected an integer from 0 to " + std::to_string(kMaxSchemaItems));
      }
      // items: false already allows none.
      *bound = bound == &max_items ? std::min(max_items, static_cast<int32_t>(it->get<int64_t>()))
                                   : static_cast<int32_t>(it->get<int64_t>());
    }
    if (min_items > max_items) return Refuse(path + ".minItems", "is above maxItems");
    bool unique = false;
    if (const auto it = s.find("uniqueItems"); it != s.end()) {
      if (!it->is_boolean()) return Refuse(path + ".uniqueItems", "expected a boolean");
      unique = it->get<bool>();
    }
    if (unique) {
      // Each item one of the enum's values, none twice: at most as many items as values.
      if (!prefix.empty() || nodes()[items].kind != Kind::kLiterals) {
        return Refuse(path + ".uniqueItems",
                      "is supported on an array whose items are an enum or a const (without "
                      "prefixItems)");
      }
      max_items = std::min(max_items, static_cast<int32_t>(nodes()[items].literals.size()));
      if (min_items > max_items) {
        return Refuse(path + ".minItems", "is above the number of distinct items");
      }
    }
    const int32_t n = New(Kind::kArray, path);
    nodes()[n].unique_items = unique;
    nodes()[n].values = items;
    nodes()[n].prefix_items = std::move(prefix);
    nodes()[n].min_items = min_items;
    nodes()[n].max_items = max_items;
    SetFirstBytes(n);
    return n;
  }

  // "enum" or "const", as compact JSON; with "type", the values of that type.
  Result<int32_t> Literals(const Json& s, const std::vector<std::string>& types,
                           const std::string& path) {
    std::vector<const Json*> values;
    std::string at = path + ".const";
    if (const auto c = s.find("const"); c != s.end()) {
      values.push_back(&*c);
    } else {
      at = path + ".enum";
      const Json& e = s["enum"];
      if (!e.is_array() || e.empty()) return Refuse(at, "expected a list of values");
      for (const Json& v : e) values.push_back(&v);
    }
    std::vector<std::string> texts;
    for (const Json* v : values) {
      const bool typed =
          types.empty() ||
          std::any_of(types.begin(), types.end(), [&](const auto& t) { return HasType(*v, t); });
      const std::string text = v->dump();
      if (typed && std::find(texts.begin(), texts.end(), text) == texts.end())
        texts.push_back(text);
    }
    if (texts.empty()) return Refuse(at, "no value has the schema's type");
    if (texts.size() > kMaxSchemaChoices) {
      return Refuse(at, "more than " + std::to_string(kMaxSchemaChoices) + " values");
    }
    const int32_t n = New(Kind::kLiterals, at);
    nodes()[n].literals = std::move(texts);
    SetFirstBytes(n);
    return n;
  }

  // anyOf, or oneOf (`exclusive`: a value must match exactly one alternative).
  Result<int32_t> AnyOf(const Json& list, const std::string& path, bool exclusive) {
    if (!list.is_array() || list.empty()) return Refuse(path, "expected a list of schemas");
    std::vector<int32_t> alternatives;
    for (size_t i = 0; i < list.size(); ++i) {
      const Result<int32_t> n = Node(list[i], path + "." + std::to_string(i));
      if (!n.ok()) return n.status();
      alternatives.push_back(*n);
    }
    const int32_t u = New(Kind::kUnion, path);
    nodes()[u].alternatives = std::move(alternatives);
    if (exclusive) exclusive_.insert(u);
    return u;
  }

  Result<int32_t> AllOf(const Json& list, const std::string& path) {
    if (!list.is_array() || list.size() != 1) {
      return Refuse(path, "only a list of one schema is supported");
    }
    return Node(list[0], path + ".0");
  }

  // A reference into the same document: "#" and a JSON pointer after it.
  Result<int32_t> Ref(const Json& ref, const std::string& path) {
    if (!ref.is_string() || !ref.get<std::string>().starts_with("#")) {
      return Refuse(path, "expected a reference into this schema (\"#\", \"#/$defs/...\")");
    }
    const std::string target = ref.get<std::string>();
    if (const auto it = refs_.find(target); it != refs_.end()) return it->second;
    const Json* to = nullptr;
    try {
      const Json::json_pointer pointer(target.substr(1));
      if (doc_.contains(pointer)) to = &doc_.at(pointer);
    } catch (const Json::exception&) {
    }
    if (to == nullptr) return Refuse(path, target + " names nothing in this schema");
    const int32_t slot = New(Kind::kPending, target);
    refs_[target] = slot;
    const Result<int32_t> n = Node(*to, target);
    if (!n.ok()) return n.status();
    DSCALE_RETURN_IF_ERROR(Fill(slot, *n, path));
    return slot;
  }

  // The slot kept for a reference becomes the node it resolved to.
  Status Fill(int32_t slot, int32_t node, const std::string& path) {
    if (node == slot) return Refuse(path, "a reference that resolves to itself admits no value");
    const JsonSchemaNode copy = nodes()[node];
    nodes()[slot] = copy;
    paths_[slot] = paths_[node];
    return Status::Ok();
  }

  void SetFirstBytes(int32_t n) {
    JsonSchemaNode& node = nodes()[n];
    switch (node.kind) {
      case Kind::kObject:
      case Kind::kTagged:
        node.first_bytes = FirstBytesOf("{");
        break;
      case Kind::kArray:
        node.first_bytes = FirstBytesOf("[");
        break;
      case Kind::kString:
        node.first_bytes = FirstBytesOf("\"");
        break;
      case Kind::kNumber:
      case Kind::kInteger:
        node.first_bytes = FirstBytesOf("-0123456789");
        break;
      case Kind::kText: {
        const PatternDfa& dfa = schema_->patterns_[static_cast<size_t>(node.pattern)];
        for (int b = 0; b < 256; ++b) node.first_bytes.set(b, dfa.next[0][b] != PatternDfa::kNone);
        break;
      }
      case Kind::kLiterals:
        node.first_bytes.reset();
        for (const std::string& t : node.literals) node.first_bytes.set(static_cast<uint8_t>(t[0]));
        break;
      default:
        break;
    }
  }

  // Every union flattened, its alternatives merged where one admits another's values, and
  // checked to begin with different bytes.
  Status Finish() {
    std::vector<uint8_t> state(nodes().size(), 0);  // 0 not seen, 1 in progress, 2 done
    for (int32_t i = 0; i < static_cast<int32_t>(state.size()); ++i) {
      if (nodes()[i].kind == Kind::kPending) {
        return Refuse(paths_[i], "references that only refer to each other admit no value");
      }
      if (nodes()[i].kind == Kind::kUnion) DSCALE_RETURN_IF_ERROR(Flatten(i, state));
    }
    return Status::Ok();
  }

  Status Flatten(int32_t u, std::vector<uint8_t>& state) {
    if (state[u] == 2) return Status::Ok();
    if (state[u] == 1) return Refuse(paths_[u], "a union that contains itself admits no value");
    state[u] = 1;
    std::vector<int32_t> flat;
    for (const int32_t a : std::vector<int32_t>(nodes()[u].alternatives)) {
      if (nodes()[a].kind != Kind::kUnion) {
        flat.push_back(a);
        continue;
      }
      DSCALE_RETURN_IF_ERROR(Flatten(a, state));
      for (const int32_t b : nodes()[a].alternatives) flat.push_back(b);
    }
    DSCALE_RETURN_IF_ERROR(Merge(u, std::move(flat)));
    state[u] = 2;
    return Status::Ok();
  }

  Status Merge(int32_t u, std::vector<int32_t> flat) {
    // A bounded number admits only some numbers: it absorbs nothing.
    const bool any_number = std::any_of(flat.begin(), flat.end(), [&](int32_t a) {
      return nodes()[a].kind == Kind::kNumber && !nodes()[a].bounded();
    });
    // A string with a length or a pattern admits only some strings: it absorbs nothing.
    const bool any_string = std::any_of(flat.begin(), flat.end(), [&](int32_t a) {
      return nodes()[a].kind == Kind::kString && !nodes()[a].held_string();
    });
    // An integer with bounds admits only some integers: it absorbs nothing.
    const bool any_integer = std::any_of(flat.begin(), flat.end(), [&](int32_t a) {
      return nodes()[a].kind == Kind::kInteger && !nodes()[a].bounded();
    });
    std::vector<std::string> literals;
    std::vector<int32_t> kept;
    bool kept_string = false, kept_number = false;
    bool overlap = false;  // some value is one more than one alternative admits
    for (const int32_t a : flat) {
      const JsonSchemaNode& n = nodes()[a];
      if (n.kind == Kind::kLiterals) {
        for (const std::string& t : n.literals) {
          const bool admitted =
              (any_string && t[0] == '"') ||
              (IsNumberText(t) && (any_number || (any_integer && IsIntegerText(t))));
          const bool repeated = std::find(literals.begin(), literals.end(), t) != literals.end();
          overlap = overlap || admitted || repeated;
          if (!admitted && !repeated) literals.push_back(t);
        }
        continue;
      }
      // What another alternative admits already: any number every integer and bounded number,
      // any integer every bounded integer, any string every held string.
      const bool absorbed =
          (any_number && (n.kind == Kind::kInteger || (n.kind == Kind::kNumber && n.bounded()))) ||
          (any_integer && n.kind == Kind::kInteger && n.bounded()) ||
          (any_string && n.held_string());
      if (absorbed) {
        overlap = true;
        continue;
      }
      bool& seen = n.kind == Kind::kString ? kept_string : kept_number;
      if ((n.kind == Kind::kString && !n.held_string()) ||
          ((n.kind == Kind::kNumber || n.kind == Kind::kInteger) && !n.bounded())) {
        overlap = overlap || seen;
        if (seen) continue;  // one any string, one number: the same values
        seen = true;
      }
      if (std::find(kept.begin(), kept.end(), a) == kept.end()) {
        kept.push_back(a);
      } else {
        overlap = true;
      }
    }
    if (overlap && exclusive_.contains(u)) {
      return Refuse(paths_[u],
                    "alternatives that admit the same value are not supported in oneOf (which "
                    "a value must match exactly once)");
    }
    if (literals.size() > kMaxSchemaChoices) {
      return Refuse(paths_[u], "more than " + std::to_string(kMaxSchemaChoices) + " values");
    }
    if (!literals.empty()) {
      const int32_t l = New(Kind::kLiterals, paths_[u]);
      nodes()[l].literals = std::move(literals);
      SetFirstBytes(l);
      kept.push_back(l);
    }
    DSCALE_RETURN_IF_ERROR(TagObjects(u, &kept));
    std::bitset<256> bytes;
    for (const int32_t a : kept) {
      if ((bytes & nodes()[a].first_bytes).any()) {
        return Refuse(paths_[u],
                      "alternatives that begin with the same byte are not supported (" + paths_[a] +
                          " and one before it; objects are told apart only by a property each "
                          "requires, holding a string const or enum of its own)");
      }
      bytes |= nodes()[a].first_bytes;
    }
    nodes()[u].alternatives = std::move(kept);
    nodes()[u].first_bytes = bytes;
    return Status::Ok();
  }

  // The string literals object `o` requires under `key` (its tag there), or null.
  const JsonSchemaNode* TagOf(int32_t o, const std::string& key) {
    for (const JsonSchemaNode::Property& p : nodes()[o].properties) {
      if (p.key != key) continue;
      const JsonSchemaNode& tag = nodes()[p.node];
      if (!p.required || tag.kind != Kind::kLiterals) return nullptr;
      const bool strings = std::all_of(tag.literals.begin(), tag.literals.end(),
                                       [](const std::string& t) { return t[0] == '"'; });
      return strings ? &tag : nullptr;
    }
    return nullptr;
  }

  // Two or more object alternatives become one tagged union when each requires one property,
  // the same key in all, holding string literals of its own: the first such key of the first
  // object's properties. Each alternative is written with its tag first (a copy of its node with
  // that property moved to the front; JSON's members have no order to keep). Otherwise they are
  // left to the check that alternatives begin differently.
  Status TagObjects(int32_t u, std::vector<int32_t>* kept) {
    std::vector<int32_t> objects;
    for (const int32_t a : *kept) {
      if (nodes()[a].kind == Kind::kObject) objects.push_back(a);
    }
    if (objects.size() < 2) return Status::Ok();
    std::vector<std::string> keys;
    for (const JsonSchemaNode::Property& p : nodes()[objects[0]].properties) keys.push_back(p.key);
    for (const std::string& key : keys) {
      std::vector<std::string> tags;
      std::vector<int32_t> owners;  // index into objects
      bool tags_each = true;
      for (size_t i = 0; i < objects.size() && tags_each; ++i) {
        const JsonSchemaNode* tag = TagOf(objects[i], key);
        tags_each = tag != nullptr;
        for (size_t t = 0; tags_each && t < tag->literals.size(); ++t) {
          tags_each = std::find(tags.begin(), tags.end(), tag->literals[t]) == tags.end();
          tags.push_back(tag->literals[t]);
          owners.push_back(static_cast<int32_t>(i));
        }
      }
      if (!tags_each) continue;
      if (tags.size() > kMaxSchemaChoices) {
        return Refuse(paths_[u], "more than " + std::to_string(kMaxSchemaChoices) + " tags");
      }
      std::vector<int32_t> tag_first;
      for (const int32_t o : objects) tag_first.push_back(WithPropertyFirst(o, key));
      const int32_t literals = New(Kind::kLiterals, paths_[u]);
      nodes()[literals].literals = std::move(tags);
      SetFirstBytes(literals);
      const int32_t tagged = New(Kind::kTagged, paths_[u]);
      JsonSchemaNode& t = nodes()[tagged];
      t.properties = {{.key = key, .node = literals, .required = true}};
      for (int32_t& owner : owners) owner = tag_first[static_cast<size_t>(owner)];
      t.alternatives = std::move(tag_first);
      t.tag_owner = std::move(owners);
      SetFirstBytes(tagged);
      std::erase_if(*kept, [&](int32_t a) { return nodes()[a].kind == Kind::kObject; });
      kept->push_back(tagged);
      return Status::Ok();
    }
    return Status::Ok();
  }

  // Object `o` itself where property `key` is its first, else a copy with it moved there.
  int32_t WithPropertyFirst(int32_t o, const std::string& key) {
    if (nodes()[o].properties[0].key == key) return o;
    JsonSchemaNode copy = nodes()[o];
    const auto it = std::find_if(copy.properties.begin(), copy.properties.end(),
                                 [&](const auto& p) { return p.key == key; });
    std::rotate(copy.properties.begin(), it, it + 1);
    const int32_t n = New(Kind::kObject, paths_[o]);
    nodes()[n] = std::move(copy);
    return n;
  }

  const Json& doc_;
  const std::string field_;
  std::shared_ptr<JsonSchema> schema_ = std::make_shared<JsonSchema>();
  std::vector<std::string> paths_;  // per node: where the schema wrote it
  std::map<std::string, int32_t> refs_;
  std::set<int32_t> exclusive_;  // unions from oneOf
};

std::shared_ptr<const JsonSchema> JsonSchema::AnyObject() {
  static const std::shared_ptr<const JsonSchema> any = [] {
    const Json none;
    return JsonSchemaCompiler(none, "").AnyObject();
  }();
  return any;
}

namespace {

// Requests that send the same schema (or pattern) share its compiled nodes and so its masks:
// `key` (the text) looked up, else `compile` run and kept while some request holds it.
template <typename Compile>
Result<std::shared_ptr<const JsonSchema>> Shared(const std::string& key, Compile compile) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::weak_ptr<const JsonSchema>> compiled;
  {
    const std::lock_guard lock(mu);
    if (const auto it = compiled.find(key); it != compiled.end()) {
      if (std::shared_ptr<const JsonSchema> s = it->second.lock()) return s;
    }
  }
  Result<std::shared_ptr<const JsonSchema>> s = compile();
  if (!s.ok()) return s;
  const std::lock_guard lock(mu);
  if (compiled.size() >= 1024)
    std::erase_if(compiled, [](const auto& e) { return e.second.expired(); });
  compiled[key] = *s;
  return s;
}

}  // namespace

Result<std::shared_ptr<const JsonSchema>> JsonSchema::Compile(const nlohmann::ordered_json& schema,
                                                              const std::string& field) {
  return Shared("schema " + schema.dump(), [&] { return JsonSchemaCompiler(schema, field).Run(); });
}

Result<std::shared_ptr<const JsonSchema>> JsonSchema::Pattern(std::string_view regex,
                                                              const std::string& field) {
  return Shared("pattern " + std::string(regex), [&] {
    const Json none;
    return JsonSchemaCompiler(none, field).Text(regex);
  });
}

Result<std::shared_ptr<const JsonSchema>> JsonSchema::Calls(const nlohmann::ordered_json& call,
                                                            const CallSyntax& syntax,
                                                            const std::string& field) {
  const std::string key = "calls " + syntax.open + '\x1f' + syntax.close + '\x1f' +
                          (syntax.whole_answer ? "whole " : "") +
                          (syntax.xml_parameters ? "xml " : "") + (syntax.one_call ? "one " : "") +
                          call.dump();
  return Shared(key, [&] { return JsonSchemaCompiler(call, field).Calls(syntax); });
}

std::string JsonSchema::ChoicesPattern(const std::vector<std::string>& choices) {
  std::string regex;
  for (const std::string& choice : choices) {
    if (!regex.empty()) regex += '|';
    for (const char c : choice) {
      if (std::string_view("\\^$.|?*+()[]{}/-").find(c) != std::string_view::npos) regex += '\\';
      regex += c;
    }
  }
  return regex;
}

bool JsonSchema::AdmitsAnyValue(const nlohmann::ordered_json& schema) {
  if (schema.is_boolean()) return schema.get<bool>();
  if (!schema.is_object()) return false;
  const auto says = [&](std::string_view key) { return schema.contains(key); };
  return std::none_of(std::begin(kShaping), std::end(kShaping), says) &&
         std::none_of(std::begin(kNumberBounds), std::end(kNumberBounds), says) &&
         std::none_of(std::begin(kStringAssertions), std::end(kStringAssertions), says) &&
         std::none_of(std::begin(kRefused), std::end(kRefused), says);
}

int32_t JsonSchema::Resolve(int32_t node, uint8_t byte) const {
  const JsonSchemaNode& n = nodes_[static_cast<size_t>(node)];
  if (!n.first_bytes.test(byte)) return -1;
  if (n.kind != JsonSchemaNode::Kind::kUnion) return node;
  for (const int32_t a : n.alternatives) {
    if (nodes_[static_cast<size_t>(a)].first_bytes.test(byte)) return a;
  }
  return -1;
}

}  // namespace dscale
