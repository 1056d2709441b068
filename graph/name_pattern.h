// Layer-name patterns, as recipes and option structs write them: a node's
// exact name, or an ECMAScript regular expression that must match the whole
// name. sparq's one matcher: pruning rules, quantization rules, sensitivity
// layer lists and recipes all go through it.
#pragma once

#include <optional>
#include <regex>
#include <string>

#include "sparq/status.h"

namespace sparq {

class NamePattern {
 public:
  // Compiles `pattern` once. A pattern that is no valid regex still matches
  // its exact text (valid_regex() says so; callers that want an error ask).
  explicit NamePattern(std::string pattern);

  // True when the pattern equals `name` or, as a regex, matches all of it.
  bool Matches(const std::string& name) const;
  const std::string& text() const { return text_; }
  bool valid_regex() const { return regex_.has_value(); }
  // The regex library's message when !valid_regex(), else "".
  const std::string& regex_error() const { return regex_error_; }

 private:
  std::string text_;
  std::optional<std::regex> regex_;
  std::string regex_error_;
};

// NamePattern(pattern).Matches(name), for a single test.
bool NameMatches(const std::string& pattern, const std::string& name);

// InvalidArgument when `pattern` is empty or not a valid regex; `what` names
// the option in the message ("<what>: '<pattern>' is not a valid regular
// expression (<why>)").
Status CheckNamePattern(const std::string& pattern, const std::string& what);

// `text` with every ECMAScript regex metacharacter escaped: a pattern that
// matches exactly `text` (and only it).
std::string EscapeRegex(const std::string& text);

}  // namespace sparq
