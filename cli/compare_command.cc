// `sparq compare REFERENCE CANDIDATE --inputs DATA`: the error of every
// matching tensor of two models, worst first (sparq::Compare).
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/progress.h"
#include "sparq/compare.h"

namespace sparq {
namespace cli {

RunFn AddCompareCommand(CLI::App& app) {
  struct Args {
    std::string reference, candidate;
    std::vector<std::string> constants;  // --constant name=value, parsed when run
    CompareOptions options;
    size_t top = 0;
    bool json = false;
    bool progress = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "compare", "Per-tensor SQNR / cosine / max abs error between the matching tensors of two models, worst first");
  sub->add_option("reference", args->reference, "Reference ONNX model (FP32)")->required();
  sub->add_option("candidate", args->candidate, "Model to compare with it (INT8 QDQ, FP16, pruned, ...)")->required();
  sub->add_option("--inputs", args->options.inputs,
                  "Dataset: .npz keyed by input name, .npy (single-input model), or a folder of them")
      ->required();
  sub->add_option("--limit", args->options.limit, "Compare on at most N samples")->check(CLI::PositiveNumber);
  AddConstantOption(sub, &args->constants);
  sub->add_option("--batch", args->options.batch,
                  "Samples per run (default: the models' fixed batch dim, else 1); memory holds one batch of "
                  "the reference's values")
      ->check(CLI::PositiveNumber);
  sub->add_option("--threads", args->options.threads, "Executor threads (default: one per hardware thread)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--top", args->top, "Show only the N worst tensors in the text table (default: all)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--plot", args->options.plot, "Write an SVG line plot of SQNR along the network (tensors in "
                                                 "graph order) to this .svg file");
  sub->add_flag("--json", args->json, "Print one JSON object instead of text (every tensor, worst first)");
  sub->add_flag("--progress", args->progress, "Show progress even when stderr is not a terminal");
  sub->footer(R"(Examples:
  sparq compare model.onnx model.int8.onnx --inputs calib.npz --limit 64 --top 10
  sparq compare model.onnx model.fp16.onnx --inputs val.npz --json
  sparq compare model.onnx model.int8.onnx --inputs val.npz --plot sqnr.svg

Matching: each float tensor of the reference pairs with, in this order, the candidate's
DequantizeLinear output of a QuantizeLinear of the same name (QDQ: x vs x_dequantized),
the candidate's tensor of the same name (an FP16 model's Cast back to float32), or the
same output of the candidate node with the same name (an FP16 model's h_fp16). Both
models run without fusions, QDQ models as their float graph. SQNR = 10 log10(sum ref^2 /
sum (ref - candidate)^2), over all samples; 'identical' when the error is 0.)");
  return [args]() {
    StatusOr<std::map<std::string, std::vector<double>>> constants = ParseConstants(args->constants);
    if (!constants.ok()) return ReportError(constants.status(), args->json);
    args->options.constants = std::move(*constants);
    const bool show_progress = args->progress || isatty(STDERR_FILENO);
    ProgressBar bar;
    if (show_progress) {
      args->options.on_progress = [&bar](const EvalProgress& p) {
        bar.Update("compare", p.done, p.total, "samples", p.seconds);
      };
    }
    auto report = Compare(args->reference, args->candidate, args->options);
    bar.End();
    if (!report.ok()) return ReportError(report.status(), args->json);
    std::cout << (args->json ? report->ToJson() + "\n" : report->ToText(args->top));
    return kExitOk;
  };
}

}  // namespace cli
}  // namespace sparq
