// `sparq sensitivity MODEL --data DATA --structure block4x4 --sparsities ...`:
// prunes each layer alone at each sparsity, measures the metric drop, and
// writes the table as CSV and as an SVG chart (sparq::SensitivityAnalysis).
#include <filesystem>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "sparq/commands.h"

namespace sparq {
namespace cli {
namespace {

StatusOr<std::vector<double>> ParseSparsities(const std::string& text) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const double v = std::stod(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      return Status::InvalidArgument("--sparsities: '" + item + "' is not a number (expected e.g. 0.3,0.5,0.7,0.9)");
    }
  }
  if (out.empty()) return Status::InvalidArgument("--sparsities: no values");
  return out;
}

}  // namespace

RunFn AddSensitivityCommand(CLI::App& app) {
  struct Args {
    std::string model, data, eval, labels, structure = "unstructured", sparsities = "0.25,0.5,0.75,0.9";
    std::string score = "magnitude", metric, output = "sensitivity";
    std::vector<std::string> layers;
    bool recovery = false, skip_first_last = false;
    int64_t samples = 256, batch = 32;
    int threads = 0;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "sensitivity", "Prune each layer alone at several sparsities and record the metric drop (CSV + SVG chart)");
  sub->add_option("model", args->model, "FP32 ONNX model")->required();
  sub->add_option("--data", args->data,
                  "Sample data (.npz keyed by input name, .npy, or a folder): recovery and activation scores, "
                  "and the evaluation unless --eval is given")
      ->required();
  sub->add_option("--eval", args->eval, "Evaluation data (default: --data)");
  sub->add_option("--labels", args->labels, "Class ids of the evaluation samples (.npy): metric top1");
  sub->add_option("--metric", args->metric,
                  "top1 (needs --labels) | agreement (top-1 agreement with the unpruned model, %) | sqnr "
                  "(dB of output 0 against the unpruned model). Default: top1 with labels, else agreement");
  sub->add_option("--structure", args->structure,
                  "unstructured | block<R>x<C> (block4x4) | <N>:<M> (each layer at 1 - N/M only) | channel | auto")
      ->capture_default_str();
  sub->add_option("--sparsities", args->sparsities, "Comma-separated sparsities in [0, 1)")->capture_default_str();
  sub->add_option("--score", args->score, "magnitude | activation")->capture_default_str();
  sub->add_flag("--recovery", args->recovery, "Re-fit the pruned layer on --data before measuring");
  sub->add_option("--layers", args->layers, "Only these layers (node names or whole-name regexes)");
  sub->add_flag("--skip-first-last", args->skip_first_last, "Leave the first and last weighted layers out");
  sub->add_option("--samples", args->samples, "Evaluation samples (0 = all)")->capture_default_str();
  sub->add_option("--batch", args->batch, "Samples per run")->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_option("--threads", args->threads, "Threads (0 = all)")->capture_default_str();
  sub->add_option("-o,--output", args->output, "Writes <output>.csv and <output>.svg")->capture_default_str();
  sub->footer(R"(Examples:
  sparq sensitivity model.onnx --data calib.npz --structure block4x4 --sparsities 0.3,0.5,0.7,0.9
  sparq sensitivity digits.onnx --data calib.npz --eval eval.npz --labels eval_labels.npy -o digits_sens

A recipe can use the same scan to give insensitive layers more sparsity:
  prune: {sensitivity: {sparsities: [0.3, 0.5, 0.7, 0.9], budget: 1.0}})");
  return [args]() {
    SensitivityOptions options;
    auto structure = PruneStructure::Parse(args->structure);
    if (!structure.ok()) return ReportError(structure.status().WithContext("--structure"));
    options.structure = *structure;
    auto sparsities = ParseSparsities(args->sparsities);
    if (!sparsities.ok()) return ReportError(sparsities.status());
    options.sparsities = *sparsities;
    auto score = ParsePruneScore(args->score);
    if (!score.ok()) return ReportError(score.status().WithContext("--score"));
    options.score = *score;
    options.recovery = args->recovery;
    options.layers = args->layers;
    options.skip_first_last = args->skip_first_last;
    options.threads = args->threads;
    options.log = [](const std::string& line) { std::cerr << "sparq: " << line << "\n"; };

    SensitivityFilesOptions files;
    files.model = args->model;
    files.data = args->data;
    files.eval = args->eval;
    files.labels = args->labels;
    files.samples = args->samples;
    files.batch_size = args->batch;
    files.sensitivity = options;
    const std::string metric = args->metric.empty() ? (args->labels.empty() ? "agreement" : "top1") : args->metric;
    auto parsed = ParseMetric(metric);
    if (!parsed.ok()) return ReportError(parsed.status().WithContext("--metric"));
    files.metric = *parsed;
    auto result = SensitivityFiles(files);
    if (!result.ok()) return ReportError(result.status());
    const SensitivityTable* table = &result->table;
    const int64_t candidates = result->candidates;
    const std::string csv = args->output + ".csv", svg = args->output + ".svg";
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::absolute(args->output).parent_path(), ec);
    Status st = WriteSensitivityCsv(*table, csv);
    if (st.ok()) {
      st = WriteSensitivitySvg(*table, svg, "Pruning sensitivity of " + std::filesystem::path(args->model).filename().string() +
                                                " (" + options.structure.ToString() + ", " + metric + " drop)");
    }
    if (!st.ok()) return ReportError(st);
    std::cout << "baseline " << metric << " " << table->baseline << "; " << table->points.size() << " points ("
              << candidates << " models evaluated)\n";
    for (const auto& [layer, why] : table->skipped) std::cout << "skipped " << layer << ": " << why << "\n";
    std::cout << "wrote " << csv << "\nwrote " << svg << "\n";
    return kExitOk;
  };
}

}  // namespace cli
}  // namespace sparq
