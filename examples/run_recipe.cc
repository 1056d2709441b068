// The C++ API does what `sparq run` does: load a recipe, run it, read the verdict.
//
//   build/bin/run_recipe recipes/quickstart.yaml
#include <cstdio>

#include "sparq/pipeline.h"
#include "sparq/recipe.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: run_recipe RECIPE.yaml\n");
    return 2;
  }
  sparq::StatusOr<sparq::Recipe> recipe = sparq::LoadRecipe(argv[1]);
  if (!recipe.ok()) {
    std::fprintf(stderr, "%s\n", recipe.status().ToString().c_str());
    return 2;
  }
  sparq::PipelineOptions options;
  options.on_log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  sparq::StatusOr<sparq::RunReport> report = sparq::RunRecipe(*recipe, options);
  if (!report.ok()) {
    std::fprintf(stderr, "%s\n", report.status().ToString().c_str());
    return 2;
  }
  std::printf("%s: %s %.2f -> %.2f (%s)\n", report->name.c_str(), report->metric.c_str(), report->fp32_metric,
              report->output_metric, report->passed ? "gate passed" : "gate failed");
  return report->passed ? 0 : 1;
}
