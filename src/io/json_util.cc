#include "io/json_util.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <vector>

#include "io/file_util.h"

namespace dscale {
namespace {

constexpr size_t kMaxQuotedBytes = 40;
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::lowest();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Cuts `text` to at most `max_bytes` without splitting a UTF-8 sequence.
std::string_view CutUtf8(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xc0) == 0x80) --end;
  return text.substr(0, end);
}

std::string IntRangeText(int64_t min, int64_t max) {
  if (min == kInt64Min && max == kInt64Max) return "an integer";
  if (max == kInt64Max) {
    if (min == 0) return "a non-negative integer";
    if (min == 1) return "a positive integer";
    return "an integer >= " + std::to_string(min);
  }
  if (min == kInt64Min) return "an integer <= " + std::to_string(max);
  return "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

std::string NumberText(double x) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", x);
  return text;
}

Status Expected(std::string_view what, const std::string& shape, const nlohmann::json& value) {
  return InvalidArgument(std::string(what) + ": expected " + shape + ", got " +
                         DescribeJson(value));
}

// Counts each object's keys while it is read: nlohmann keeps one member per key, so an object
// that ends with fewer members than keys read named one of them twice. No key is copied, so
// every document can go through it; DuplicateKeyWatch then names the key for the error.
class KeyCountWatch {
 public:
  using Event = nlohmann::json::parse_event_t;

  bool operator()(int /*depth*/, Event event, nlohmann::json& parsed) {
    if (event == Event::object_start) {
      counts_.push_back(0);
    } else if (event == Event::key && !counts_.empty()) {
      ++counts_.back();
    } else if (event == Event::object_end && !counts_.empty()) {
      repeated_ = repeated_ || parsed.size() != counts_.back();
      counts_.pop_back();
    }
    return true;
  }

  bool repeated() const { return repeated_; }

 private:
  std::vector<size_t> counts_;
  bool repeated_ = false;
};

// Watches the parser's events for a key repeated within one object, keeping the path of the
// object being read for the message.
class DuplicateKeyWatch {
 public:
  using Event = nlohmann::json::parse_event_t;

  bool operator()(int /*depth*/, Event event, nlohmann::json& parsed) {
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        frames_.push_back({.object = event == Event::object_start, .segment = ChildSegment()});
        break;
      case Event::object_end:
      case Event::array_end:
        if (!frames_.empty()) frames_.pop_back();
        CountElement();
        break;
      case Event::key:
        if (!frames_.empty() && parsed.is_string()) {
          Frame& frame = frames_.back();
          frame.key = parsed.get_ref<const std::string&>();
          if (!frame.keys.insert(frame.key).second && !duplicate_) {
            duplicate_ = "duplicate key \"" + frame.key + "\"";
            const std::string path = Path();
            if (!path.empty()) *duplicate_ += " in \"" + path + "\"";
          }
        }
        break;
      case Event::value:
        CountElement();
        break;
    }
    return true;
  }

  const std::optional<std::string>& duplicate() const { return duplicate_; }

 private:
  struct Frame {
    bool object = false;
    std::string segment;  // how the parent names this container: ".key", "key" or "[i]"
    std::set<std::string> keys;
    std::string key;   // objects: the last key read
    size_t index = 0;  // arrays: the element being read
  };

  std::string ChildSegment() const {
    if (frames_.empty()) return "";
    const Frame& parent = frames_.back();
    if (!parent.object) return "[" + std::to_string(parent.index) + "]";
    return frames_.size() == 1 ? parent.key : "." + parent.key;
  }

  void CountElement() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
  }

  std::string Path() const {
    std::string path;
    for (const Frame& frame : frames_) path += frame.segment;
    return path;
  }

  std::vector<Frame> frames_;
  std::optional<std::string> duplicate_;
};

}  // namespace

std::optional<nlohmann::json> ParseJson(std::string_view text) {
  nlohmann::json value = nlohmann::json::parse(text.begin(), text.end(), /*cb=*/nullptr,
                                               /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

Result<nlohmann::json> ParseJsonDocument(std::string_view text) {
  KeyCountWatch counts;
  nlohmann::json value = nlohmann::json::parse(
      text.begin(), text.end(),
      [&counts](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        return counts(depth, event, parsed);
      },
      /*allow_exceptions=*/false);
  if (value.is_discarded()) return DataLoss("not valid JSON");
  if (!counts.repeated()) return value;
  // Some object named a key twice: read the text again, this time keeping every object's keys,
  // to say which key and where.
  DuplicateKeyWatch watch;
  const nlohmann::json again = nlohmann::json::parse(
      text.begin(), text.end(),
      [&watch](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        return watch(depth, event, parsed);
      },
      /*allow_exceptions=*/false);
  DSCALE_CHECK(!again.is_discarded());  // the same text parsed a moment ago
  return DataLoss(watch.duplicate().value_or("duplicate key"));
}

std::optional<int64_t> JsonInt64(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t x = value.get<uint64_t>();
    if (x > static_cast<uint64_t>(kInt64Max)) return std::nullopt;
    return static_cast<int64_t>(x);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

std::string DescribeJson(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::string: {
      const std::string& text = value.get_ref<const std::string&>();
      const std::string_view cut = CutUtf8(text, kMaxQuotedBytes);
      return "\"" + std::string(cut) + (cut.size() < text.size() ? "...\"" : "\"");
    }
    case nlohmann::json::value_t::array:
      if (value.empty()) return "an empty array";
      return "an array of " + std::to_string(value.size()) +
             (value.size() == 1 ? " element" : " elements");
    case nlohmann::json::value_t::object:
      return value.empty() ? "an empty object" : "an object";
    case nlohmann::json::value_t::discarded:
      return "nothing";
    default:
      // null, booleans and numbers: dump() cannot fail on them.
      return value.dump();
  }
}

std::string JsonFieldName(std::string_view where, std::string_view field) {
  return std::string(where) + ": field \"" + std::string(field) + "\"";
}

const nlohmann::json* JsonMember(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

Result<int64_t> ReadJsonInt(const nlohmann::json& value, std::string_view what, int64_t min,
                            int64_t max) {
  DSCALE_CHECK(min <= max);
  const std::string shape = IntRangeText(min, max);
  if (value.is_number_unsigned()) {
    // Compared as unsigned: a value past int64 is out of range, never wrapped.
    const uint64_t x = value.get<uint64_t>();
    if (max < 0 || x > static_cast<uint64_t>(max)) return Expected(what, shape, value);
    const auto in_range = static_cast<int64_t>(x);
    if (in_range < min) return Expected(what, shape, value);
    return in_range;
  }
  if (value.is_number_integer()) {
    const int64_t x = value.get<int64_t>();
    if (x < min || x > max) return Expected(what, shape, value);
    return x;
  }
  return Expected(what, shape, value);
}

Result<double> ReadJsonNumber(const nlohmann::json& value, std::string_view what, double min,
                              double max) {
  constexpr double kLowest = std::numeric_limits<double>::lowest();
  constexpr double kHighest = std::numeric_limits<double>::max();
  std::string shape = "a finite number";
  if (min != kLowest && max != kHighest) {
    shape = "a number in [" + NumberText(min) + ", " + NumberText(max) + "]";
  } else if (min != kLowest) {
    shape = "a number >= " + NumberText(min);
  } else if (max != kHighest) {
    shape = "a number <= " + NumberText(max);
  }
  if (!value.is_number()) return Expected(what, shape, value);
  const double x = value.get<double>();
  if (!std::isfinite(x) || x < min || x > max) return Expected(what, shape, value);
  return x;
}

Result<std::string> ReadJsonString(const nlohmann::json& value, std::string_view what) {
  if (!value.is_string()) return Expected(what, "a string", value);
  return value.get<std::string>();
}

Result<bool> ReadJsonBool(const nlohmann::json& value, std::string_view what) {
  if (!value.is_boolean()) return Expected(what, "true or false", value);
  return value.get<bool>();
}

Result<nlohmann::json> ReadTaggedJsonFile(const std::string& path, std::string_view format,
                                          size_t max_bytes) {
  DSCALE_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path, max_bytes));
  Result<nlohmann::json> parsed = ParseJsonDocument(text);
  if (!parsed.ok()) return parsed.status().WithContext(path);
  if (!parsed->is_object()) {
    return InvalidArgument(path + ": expected a JSON object, got " + DescribeJson(*parsed));
  }
  const nlohmann::json* tag = JsonMember(*parsed, "format");
  if (tag == nullptr || !tag->is_string() || *tag != format) {
    return InvalidArgument(JsonFieldName(path, "format") + ": expected \"" + std::string(format) +
                           "\", got " +
                           (tag == nullptr ? std::string("nothing") : DescribeJson(*tag)));
  }
  return parsed;
}

}  // namespace dscale
