// Pinned inputs and the Ifs they decide (internal to the pipeline): the one
// folding `sparq run` (data.constants), `sparq calibrate` and `sparq quantize`
// (--constant) apply, so that a table calibrated by one drives the others.
//
//   calibrate --constant sr=16000 ── fold ── observe ── table {folded_inputs: {sr: [16000]}, tensors: ...}
//   quantize  --constant sr=16000 ── fold ── CheckFoldedInputs(table) ── QuantizeModel
//   run       data.constants       ── fold ── (calibrate | quantize.scales + CheckFoldedInputs) ── ...
//
// Each fold gives the same graph (FoldDecidedIfs is deterministic), so the
// tensor names the table holds are the names the quantizer looks up.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sparq/calibrate.h"
#include "sparq/graph.h"
#include "sparq/status.h"

namespace sparq {

using PinnedValues = std::map<std::string, std::vector<double>>;  // input name -> its values (ConstantInput)

struct PinnedFold {
  std::vector<std::string> folded;  // one line per folded If: what decided it and which branch was inlined
  PinnedValues inputs_removed;      // pinned inputs that left the model (a folded condition read them)
  std::vector<std::string> removed_lines;  // one warning per removed input: the model now computes that value only
};

// Folds every If of `model` that `pinned` (with initializers and Constant
// nodes) decides (FoldDecidedIfs). `where` names the option in messages
// ("data.constants", "--constant"). Errors: InvalidArgument naming the
// input when a pinned name is not an input of the model (its fed inputs,
// initializer defaults included) or its values do not fit it
// (ConstantInput); those of FoldDecidedIfs, naming the If.
StatusOr<PinnedFold> FoldPinnedIfs(Model* model, const PinnedValues& pinned, const std::string& where);

// "name=v1,v2" as --constant spells it.
std::string PinnedSpec(const std::string& name, const std::vector<double>& values);

// The table's folded inputs (CalibrationTable::folded_inputs) against this
// run's (PinnedFold::inputs_removed). A table calibrated on a folded model
// holds the taken branch's tensor names, right only for that pin: OK when
// both fold the same inputs to the same values, or when the table records
// none (it was calibrated on the model as written, or by a sparq that did
// not record them: CheckCalibrationTable then judges its tensors).
// Errors: InvalidArgument naming `table_where`, the input and both values
// when this run does not pin an input the table folded, pins it to other
// values, or folds an input the table's calibration did not.
Status CheckFoldedInputs(const CalibrationTable& table, const PinnedValues& removed, const std::string& table_where,
                         const std::string& option);

}  // namespace sparq
