// `sparq recipe check RECIPE [--print] [--no-files] [--set key=value ...]`: validates a recipe
// without running it (sparq::LoadRecipe), and what it asks of its model
// (sparq::CheckRecipeAgainstModel).
#include <memory>

#include "cli/commands.h"
#include "sparq/onnx_io.h"
#include "sparq/pipeline.h"
#include "sparq/recipe.h"

namespace sparq {
namespace cli {

RunFn AddRecipeCommand(CLI::App& app) {
  struct Args {
    std::string recipe;
    bool print = false;
    bool no_files = false;
    std::vector<std::string> overrides;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("recipe", "Work with recipes");
  sub->require_subcommand(1);
  CLI::App* check = sub->add_subcommand("check", "Validate a recipe: every key, type, range and file; all errors at once");
  check->add_option("recipe", args->recipe, "Recipe YAML file")->required();
  check->add_flag("--print", args->print, "Print the effective recipe (defaults filled in) as YAML");
  check->add_flag("--no-files", args->no_files, "Do not check that the model and data files exist");
  check->add_option("--set", args->overrides, "As `sparq run --set`: override a recipe key (KEY=VALUE, repeatable)")
      ->allow_extra_args(false);  // one KEY=VALUE per --set, so the recipe may follow it
  check->footer(R"(Examples:
  sparq recipe check recipes/quickstart.yaml
  sparq recipe check my_recipe.yaml --print
  sparq recipe check my_recipe.yaml --set quantize.precision=mixed --print)");
  return [args]() {
    RecipeParseOptions options;
    options.check_files = !args->no_files;
    options.overrides = args->overrides;
    auto recipe = LoadRecipe(args->recipe, options);
    if (!recipe.ok()) return ReportError(recipe.status());
    for (const auto& w : recipe->warnings) std::cerr << "sparq: warning: " << w << "\n";
    if (options.check_files) {  // what the recipe asks of this model (prune rules)
      auto model = LoadModel(recipe->model);
      if (!model.ok()) return ReportError(model.status());
      if (Status st = CheckRecipeAgainstModel(*recipe, *model); !st.ok()) return ReportError(st);
    }
    if (args->print) std::cout << RecipeToYaml(*recipe);
    else std::cout << args->recipe << ": OK\n";
    return kExitOk;
  };
}

}  // namespace cli
}  // namespace sparq
