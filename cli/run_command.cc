// `sparq run RECIPE [--set key=value ...]`: prune, calibrate, quantize, write, evaluate and gate
// (sparq::RunRecipe). Exit 0 when the gate passes, 1 when it fails, 2 on error.
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/progress.h"
#include "sparq/pipeline.h"

namespace sparq {
namespace cli {

RunFn AddRunCommand(CLI::App& app) {
  struct Args {
    std::string recipe;
    bool json = false;
    bool progress = false;
    bool quiet = false;
    std::vector<std::string> overrides;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("run", "Run a recipe: prune, calibrate, quantize, write the model, evaluate it "
                                            "against FP32 and apply the accuracy gate");
  sub->add_option("recipe", args->recipe, "Recipe YAML file (see recipes/README.md)")->required();
  sub->add_flag("--json", args->json, "Print the report as JSON on stdout");
  sub->add_flag("--progress", args->progress, "Show progress bars even when stderr is not a terminal");
  sub->add_flag("-q,--quiet", args->quiet, "Print only the final table (or JSON)");
  sub->add_option("--set", args->overrides,
                  "Override a recipe key before the recipe is checked: a dotted key path and a YAML value "
                  "(quantize.calibration.method=max, evaluate.gate.max_drop=2, 'quantize.exclude_ops=[Softmax]', "
                  "'prune.layers[0].sparsity=0.6' for a list item); "
                  "repeatable, a later one wins; an unknown key is an error naming the --set")
      ->allow_extra_args(false);  // one KEY=VALUE per --set, so the recipe may follow it
  sub->footer(R"(Examples:
  sparq run recipes/quickstart.yaml
  sparq run my_recipe.yaml --json > report.json
  sparq run recipe.yaml --set quantize.calibration.method=max --set evaluate.gate.max_drop=2
  sparq run recipe.yaml --set 'quantize.layers[0].precision=fp16'

Exit status: 0 gate passed, 1 gate failed (a limit of evaluate.gate not met, or
prune.sparsity not reached; the model is then <stem>.FAILED.onnx or not kept, per
evaluate.gate.failed_model), 2 error (bad recipe, missing file, unsupported model).)");
  return [args]() {
    RecipeParseOptions parse;
    parse.overrides = args->overrides;
    auto recipe = LoadRecipe(args->recipe, parse);
    if (!recipe.ok()) return ReportError(recipe.status(), args->json);
    ProgressBar bars;
    PipelineOptions options;
    const bool show_progress = !args->quiet && (args->progress || isatty(STDERR_FILENO));
    if (show_progress) {
      options.on_progress = [&bars](const StageProgress& p) { bars.Update(p.stage, p.done, p.total, "samples"); };
    }
    if (!args->quiet) {
      options.on_log = [&bars, show_progress](const std::string& line) {
        if (show_progress) bars.End();
        std::fprintf(stderr, "sparq: %s\n", line.c_str());
      };
    }
    auto report = RunRecipe(*recipe, options);
    bars.End();
    if (!report.ok()) return ReportError(report.status(), args->json);
    std::cout << (args->json ? report->ToJson() : report->ToText());
    if (!args->json) {
      for (const auto& f : report->files) std::cout << "  wrote       " << f << "\n";
    }
    return report->passed ? kExitOk : kExitGateFailed;
  };
}

}  // namespace cli
}  // namespace sparq
