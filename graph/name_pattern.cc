#include "graph/name_pattern.h"

namespace sparq {

NamePattern::NamePattern(std::string pattern) : text_(std::move(pattern)) {
  try {
    regex_.emplace(text_, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    regex_error_ = e.what();
  }
}

bool NamePattern::Matches(const std::string& name) const {
  return text_ == name || (regex_ && std::regex_match(name, *regex_));
}

bool NameMatches(const std::string& pattern, const std::string& name) {
  if (pattern == name) return true;  // no regex to compile
  return NamePattern(pattern).Matches(name);
}

Status CheckNamePattern(const std::string& pattern, const std::string& what) {
  if (pattern.empty()) return Status::InvalidArgument(what + ": match is empty");
  NamePattern p(pattern);
  if (!p.valid_regex()) {
    return Status::InvalidArgument(what + ": '" + pattern + "' is not a valid regular expression (" +
                                   p.regex_error() + ")");
  }
  return Status::OK();
}

std::string EscapeRegex(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace sparq
