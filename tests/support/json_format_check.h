#pragma once
// The string formats spec/json_schema.cc holds (date, time, date-time, uuid, email, ipv4), checked
// by reading the text field by field as RFC 3339, RFC 4122, RFC 5322's dot-atom at a domain of
// labels and dotted decimal define them, independently of the patterns the compiler holds them
// to. Other formats pass.

#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace dscale::testing {

namespace format_check {

// The decimal value of t[at, at + n), or -1 where it is not n digits.
inline int Digits(std::string_view t, size_t at, size_t n) {
  if (at + n > t.size()) return -1;
  int v = 0;
  for (size_t i = at; i < at + n; ++i) {
    if (t[i] < '0' || t[i] > '9') return -1;
    v = v * 10 + (t[i] - '0');
  }
  return v;
}

inline bool InRange(std::string_view t, size_t at, int most) {
  const int v = Digits(t, at, 2);
  return v >= 0 && v <= most;
}

// RFC 3339 full-date at the start of t: YYYY-MM-DD, the day within its month.
inline bool FullDate(std::string_view t) {
  const int y = Digits(t, 0, 4), m = Digits(t, 5, 2), d = Digits(t, 8, 2);
  if (t.size() < 10 || y < 0 || m < 1 || m > 12 || d < 1 || t[4] != '-' || t[7] != '-') {
    return false;
  }
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  const int days[] = {31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return d <= days[m - 1];
}

// RFC 3339 full-time, the whole of t: HH:MM:SS[.frac](Z|±HH:MM).
inline bool FullTime(std::string_view t) {
  if (t.size() < 9 || !InRange(t, 0, 23) || t[2] != ':' || !InRange(t, 3, 59) || t[5] != ':' ||
      !InRange(t, 6, 60)) {
    return false;
  }
  size_t i = 8;
  if (t[i] == '.') {
    const size_t first = ++i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
    if (i == first) return false;
  }
  if (i + 1 == t.size() && (t[i] == 'Z' || t[i] == 'z')) return true;
  return i + 6 == t.size() && (t[i] == '+' || t[i] == '-') && InRange(t, i + 1, 23) &&
         t[i + 3] == ':' && InRange(t, i + 4, 59);
}

inline std::vector<std::string_view> Split(std::string_view t, char by) {
  std::vector<std::string_view> parts;
  size_t from = 0;
  for (size_t i = 0; i <= t.size(); ++i) {
    if (i == t.size() || t[i] == by) {
      parts.push_back(t.substr(from, i - from));
      from = i + 1;
    }
  }
  return parts;
}

inline bool Alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

inline bool Email(std::string_view t) {
  const std::vector<std::string_view> at = Split(t, '@');
  if (at.size() != 2) return false;
  for (const std::string_view atom : Split(at[0], '.')) {
    if (atom.empty()) return false;
    for (const char c : atom) {
      if (!Alnum(c) && std::string_view("!#$%&'*+/=?^_`{|}~-").find(c) == std::string_view::npos) {
        return false;
      }
    }
  }
  const std::vector<std::string_view> labels = Split(at[1], '.');
  if (labels.size() < 2) return false;
  for (const std::string_view label : labels) {
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (const char c : label) {
      if (!Alnum(c) && c != '-') return false;
    }
  }
  return true;
}

inline bool Ipv4(std::string_view t) {
  const std::vector<std::string_view> parts = Split(t, '.');
  if (parts.size() != 4) return false;
  for (const std::string_view part : parts) {
    const int v = Digits(part, 0, part.size());
    if (part.empty() || part.size() > 3 || (part.size() > 1 && part[0] == '0') || v < 0 ||
        v > 255) {
      return false;
    }
  }
  return true;
}

inline bool Uuid(std::string_view t) {
  if (t.size() != 36) return false;
  for (size_t i = 0; i < t.size(); ++i) {
    const bool hyphen = i == 8 || i == 13 || i == 18 || i == 23;
    if (hyphen ? t[i] != '-' : std::isxdigit(static_cast<unsigned char>(t[i])) == 0) return false;
  }
  return true;
}

}  // namespace format_check

inline bool FormatHolds(std::string_view format, std::string_view t) {
  using namespace format_check;
  if (format == "date") return t.size() == 10 && FullDate(t);
  if (format == "time") return FullTime(t);
  if (format == "date-time") {
    return t.size() > 11 && FullDate(t) && (t[10] == 'T' || t[10] == 't') && FullTime(t.substr(11));
  }
  if (format == "uuid") return Uuid(t);
  if (format == "email") return Email(t);
  if (format == "ipv4") return Ipv4(t);
  return true;
}

}  // namespace dscale::testing
