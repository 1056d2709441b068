// `sparq inspect MODEL [--json]`: opsets, inputs/outputs, operator histogram,
// parameters and weight sparsity per layer (sparq::InspectModel).
#include <memory>

#include "cli/commands.h"
#include "sparq/inspect.h"

namespace sparq {
namespace cli {

RunFn AddInspectCommand(CLI::App& app) {
  struct Args {
    std::string model;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("inspect", "Summarize an ONNX model: opsets, inputs and outputs, operators, "
                                                "parameters and weight sparsity per layer");
  sub->add_option("model", args->model, "ONNX model file")->required();
  sub->add_flag("--json", args->json, "Print one JSON object instead of tables");
  sub->footer(R"(Examples:
  sparq inspect resnet18.onnx
  sparq inspect resnet18.onnx --json | python3 -m json.tool)");
  return [args]() {
    auto summary = InspectModel(args->model);
    if (!summary.ok()) return ReportError(summary.status(), args->json);
    std::cout << (args->json ? summary->ToJson() + "\n" : summary->ToText());
    return kExitOk;
  };
}

}  // namespace cli
}  // namespace sparq
