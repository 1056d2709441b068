// The subcommands of the `sparq` tool. Each file cli/<name>_command.cc adds
// one subcommand: it declares its options on a CLI11 sub-app and returns the
// function that runs it after parsing. The functions are thin: they call one
// library function and print its result or its Status.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "sparq/status.h"

namespace sparq {
namespace cli {

constexpr int kExitOk = 0;
constexpr int kExitGateFailed = 1;  // `sparq run`: the accuracy gate failed
constexpr int kExitError = 2;  // any error, bad arguments included

// Runs a parsed subcommand; returns the process exit code.
using RunFn = std::function<int()>;

RunFn AddInspectCommand(CLI::App& app);
RunFn AddEvalCommand(CLI::App& app);
RunFn AddRunCommand(CLI::App& app);
RunFn AddRecipeCommand(CLI::App& app);
RunFn AddCalibrateCommand(CLI::App& app);
RunFn AddQuantizeCommand(CLI::App& app);
RunFn AddConvertCommand(CLI::App& app);
RunFn AddSensitivityCommand(CLI::App& app);
RunFn AddCompareCommand(CLI::App& app);

// --constant name=value[,v2,...] (repeatable) on `sub`, into `specs`; the
// parsed map for DatasetOptions::constants (InvalidArgument naming a bad spec
// or an input pinned twice). cli/constants.cc.
void AddConstantOption(CLI::App* sub, std::vector<std::string>* specs);
StatusOr<std::map<std::string, std::vector<double>>> ParseConstants(const std::vector<std::string>& specs);

// Prints "sparq: error: <message>" to stderr and returns kExitError.
inline int ReportError(const std::string& message) {
  std::cerr << "sparq: error: " << message << std::endl;
  return kExitError;
}
inline int ReportError(const Status& status) { return ReportError(status.message()); }
// With `json` (the command's --json), also prints the error as one JSON object
// on stdout: {"schema_version", "sparq_version", "error": {"code", "message"}}.
int ReportError(const Status& status, bool json);

}  // namespace cli
}  // namespace sparq
