// The retrain hook of progressive pruning: after each step's masks (and
// least-squares recovery), a caller-supplied function may fine-tune the model;
// PruneModel then checks that the graph and weight shapes are unchanged,
// applies the step's masks again (training moves pruned weights away from 0)
// and evaluates. MakeRetrainCommand builds such a function that runs the
// user's own training program on files.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sparq/export.h"
#include "sparq/graph.h"
#include "sparq/npy.h"
#include "sparq/status.h"

namespace sparq {

// What a retrain hook gets at the end of one step. The pointers are valid
// for the call only.
struct SPARQ_API RetrainRequest {
  int step = 0;          // 1-based
  int steps = 0;         // of the schedule
  double target = 0.0;   // the schedule's sparsity at this step
  const Model* model = nullptr;  // masked (and recovered) at this step
  // Per pruned weight (by initializer or Constant name): uint8 of the
  // weight's own shape and layout, 1 = kept, 0 = pruned. Only pruned layers'
  // weights are listed.
  const NamedTensors* masks = nullptr;
};
// Returns the retrained model; it must have the graph of `model` (nodes,
// inputs, outputs) and the same weights by name, type and shape.
using PruneRetrainFn = std::function<StatusOr<Model>(const RetrainRequest& request)>;

// The names a retrain command line may use, written {name}:
//   {model_in}   the step's masked model (ONNX) sparq wrote for the command
//   {masks}      the masks (.npz: one uint8 0/1 array per pruned weight name,
//                the weight's shape, 1 = kept)
//   {model_out}  where the command must write the retrained model (ONNX)
//   {step} {steps}  this step (1-based) and the schedule's step count
//   {sparsity}   the schedule's target at this step (e.g. 0.4375)
//   {data}       RetrainCommandOptions::data (the calibration data by default)
//   {work_dir}   the step's folder (holds the three files)
// {{ and }} are literal braces.
SPARQ_API const std::vector<std::string>& RetrainPlaceholders();

struct SPARQ_API RetrainCommandOptions {
  // The program and its arguments, each placeholder replaced by its value
  // (a value is always one argument, whatever it holds). With `shell`: one
  // element, run by /bin/sh -c, each value quoted for the shell.
  std::vector<std::string> command;
  bool shell = false;
  double timeout_seconds = 3600.0;  // > 0; then SIGTERM, SIGKILL 2 s later
  std::string working_dir;          // where the command runs; "" = the current folder
  std::string data;                 // the value of {data}
  // Folder for the steps' files; "" = a fresh one under the system's
  // temporary folder. Each step uses <work_dir>/step<k>/ and removes it when
  // the model is read back (kept when the command fails, for a look).
  std::string work_dir;
  // Where the command line and the program's output go, line by line.
  std::function<void(const std::string&)> log;
};

// InvalidArgument naming the problem: an empty command, an unknown {name}
// (the message lists the known ones), an unmatched brace, `shell` with more
// than one element, a timeout <= 0.
SPARQ_API Status CheckRetrainCommand(const RetrainCommandOptions& options);

// A hook that, per step: writes {model_in} and {masks}, runs the command
// (no shell unless `shell`), and reads {model_out} back. Its errors name the
// step and the command: the command could not start, exited non-zero or by a
// signal, ran past the time limit (the tail of its output is in the message),
// did not write {model_out}, or wrote a file that does not load. Errors of
// CheckRetrainCommand come back from the first call.
SPARQ_API PruneRetrainFn MakeRetrainCommand(RetrainCommandOptions options);

}  // namespace sparq
