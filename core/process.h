// Running another program: argument vectors (no shell), a time limit, its
// output in a file. Internal to sparq (the retrain hook uses it).
#pragma once

#include <string>
#include <vector>

#include "sparq/status.h"

namespace sparq {

struct ProcessResult {
  int exit_code = -1;      // the program's exit status; -1 when a signal ended it
  int term_signal = 0;     // the signal that ended it, 0 when it exited
  bool timed_out = false;  // sparq stopped it at the time limit
  double seconds = 0.0;
};

// Starts argv[0] (looked up in PATH when it has no '/') with `argv`, stdin
// from /dev/null, stdout and stderr both into `output_path` (created or
// truncated), in `cwd` ("" = sparq's own), in a process group of its own; no
// shell is involved. Waits at
// most `timeout_seconds` (> 0), then sends SIGTERM to the group and, 2 s
// later, SIGKILL. A program that ran (whatever its exit) is OK with the
// result; errors: InvalidArgument for an empty argv or a bad timeout,
// NotFound when the program cannot be started (not found, not executable),
// IOError when the output file cannot be opened. Thread safe.
StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv, const std::string& output_path,
                                   double timeout_seconds, const std::string& cwd = "");

// Splits a command line into arguments the way a POSIX shell splits words,
// and nothing more: blanks separate, '...' keeps everything literally, "..."
// keeps all but \" and \\, a backslash outside quotes escapes the next
// character. No expansion of variables, globs or ~. InvalidArgument for an
// unterminated quote or a trailing backslash.
StatusOr<std::vector<std::string>> SplitCommandLine(const std::string& line);

// `s` quoted for a POSIX shell ('...' with ' written as '\'').
std::string ShellQuote(const std::string& s);

}  // namespace sparq
