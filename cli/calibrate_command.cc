// `sparq calibrate MODEL --data DATA [--method kl] -o scales.json`: observes
// activations and writes the calibration table (sparq::CalibrateFiles);
// `--shard i/n -o part-i.hist` writes one shard's partial statistics
// (CalibrateShardFiles) and `--merge part-*.hist -o scales.json` turns them
// into the table (MergeCalibrationFiles).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <sstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/progress.h"
#include "sparq/commands.h"
#include "sparq/device.h"
#include "sparq/memory.h"

namespace sparq {
namespace cli {

RunFn AddCalibrateCommand(CLI::App& app) {
  struct Args {
    std::string method = "kl";
    bool progress = false;
    bool json = false;
    std::string shard;                // "i/n"
    std::vector<std::string> merge;   // partial statistics files
    std::vector<std::string> constants;  // --constant name=value, parsed when run
    CalibrateFilesOptions options;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("calibrate", "Observe activations over sample data and write a calibration table "
                                                  "(and optionally a TensorRT calibration cache)");
  sub->add_option("model", args->options.model, "FP32 ONNX model (not with --merge)");
  sub->add_option("--data", args->options.data, "Calibration data: .npz keyed by input name, .npy, or a folder (not with --merge)");
  sub->add_option("-o,--output", args->options.output,
                  "Calibration table to write (JSON); with --shard, the shard's partial statistics")->required();
  sub->add_option("--shard", args->shard,
                  "Calibrate only shard i of n of the data (contiguous whole batches; docs/scale.md) and write its "
                  "partial statistics to -o; then merge every part with --merge")
      ->type_name("i/n");
  sub->add_option("--merge", args->merge,
                  "Merge the partial statistics of every shard of one run (--shard) into the table (and --trt-cache): "
                  "the same bytes as one process over all the data")
      ->type_name("PART...");
  std::string methods;  // from the calibrator's one name table
  for (const CalibrationMethodInfo& m : CalibrationMethods())
    methods += std::string(methods.empty() ? "" : "; ") + m.name + (m.alias ? std::string(" (or ") + m.alias + ")" : "") +
               ": " + m.description;
  sub->add_option("--method", args->method, methods)->capture_default_str();
  sub->add_option("--percentile", args->options.calibration.percentile, "Percentile for --method percentile")->capture_default_str();
  sub->add_option("--bins", args->options.calibration.bins, "Histogram bins")->capture_default_str();
  sub->add_flag("!--asymmetric", args->options.calibration.symmetric, "uint8 ranges with a zero point instead of symmetric int8");
  sub->add_option("--batch", args->options.batch_size, "Samples per batch")->capture_default_str();
  sub->add_option("--samples", args->options.samples, "Use at most this many samples (0 = all)")->capture_default_str();
  AddConstantOption(sub, &args->constants);
  sub->add_option("--threads", args->options.calibration.threads, "Threads (0 = all)")->capture_default_str();
  sub->add_option("--backend", args->options.calibration.backend,
                  "Where the forward passes run: cpu (default), cuda (an error without a GPU), auto")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  sub->add_option("--trt-cache", args->options.trt_cache,
                  "Also write a TensorRT calibration cache here (methods kl and max, symmetric tables only)");
  sub->add_option("--trt-version", args->options.trt_version, "TensorRT version in the cache header (8601 = 8.6.1)")
      ->capture_default_str();
  sub->add_flag("--int8-only", args->options.int8_only,
                "Observe only the tensors INT8 quantization needs (inputs and outputs of Conv/Gemm/MatMul), the rest "
                "fused: faster, less memory; the table then serves INT8 quantization only (no FP16, no --trt-cache)");
  sub->add_flag("--json", args->json,
                "Print one JSON object (tensors, samples, method, output, seconds, peak_rss_mib) instead of text");
  sub->add_flag("--progress", args->progress, "Show a progress bar even when stderr is not a terminal");
  sub->footer(R"(Examples:
  sparq calibrate model.onnx --data calib.npz --method kl -o scales.json
  sparq calibrate model.onnx --data calib/ --method percentile --percentile 99.99 -o scales.json
  sparq calibrate model.onnx --data calib.npz --method max -o scales.json --trt-cache calib.cache --trt-version 8601
  sparq calibrate model.onnx --data calib.npz --int8-only -o scales.json && sparq quantize model.onnx --scales scales.json -o int8.onnx
  sparq calibrate model.onnx --data calib.npz --method kl --shard 0/3 -o part-0.hist   # ... 1/3, 2/3 elsewhere
  sparq calibrate --merge part-0.hist part-1.hist part-2.hist -o scales.json --trt-cache calib.cache)");
  return [args]() {
    StatusOr<std::map<std::string, std::vector<double>>> constants = ParseConstants(args->constants);
    if (!constants.ok()) return ReportError(constants.status());
    args->options.constants = std::move(*constants);
    if (!args->merge.empty()) {
      if (!args->options.model.empty() || !args->options.data.empty() || !args->shard.empty()) {
        return ReportError(Status::InvalidArgument(
            "--merge takes only the parts (and -o, --trt-cache, --trt-version, --threads): the model, --data and "
            "the method options are in the parts"));
      }
      MergeCalibrationFilesOptions m;
      m.parts = args->merge;
      m.output = args->options.output;
      m.trt_cache = args->options.trt_cache;
      m.trt_version = args->options.trt_version;
      m.threads = args->options.calibration.threads;
      auto table = MergeCalibrationFiles(m);
      if (!table.ok()) return ReportError(table.status());
      std::cout << "merged " << m.parts.size() << " parts: " << table->tensors.size() << " tensors on "
                << table->samples << " samples (" << table->method << ") -> " << m.output << "\n";
      return kExitOk;
    }
    if (args->options.model.empty() || args->options.data.empty()) {
      return ReportError(Status::InvalidArgument("calibrate needs a model and --data (or --merge PART...)"));
    }
    auto method = ParseCalibrationMethod(args->method);
    if (!method.ok()) return ReportError(method.status());
    args->options.calibration.method = *method;
    ProgressBar bar;
    if (args->progress || isatty(STDERR_FILENO)) {
      args->options.calibration.progress = [&bar](CalibrationProgress& p) {
        bar.Update("calibrate", p.samples, p.total_samples, "samples");
      };
    }
    if (args->options.calibration.backend == "auto") {  // say where it runs (cuda, or why the CPU)
      std::string note;
      if (ResolveBackendName("auto", &note).ok()) std::cerr << "sparq: " << note << "\n";
    }
    if (!args->shard.empty()) {
      auto shard = ParseShard(args->shard);
      if (!shard.ok()) return ReportError(shard.status().WithContext("--shard"));
      args->options.shard = shard->first;
      args->options.shards = shard->second;
      auto partial = CalibrateShardFiles(args->options);
      bar.End();
      if (!partial.ok()) return ReportError(partial.status());
      std::cout << "shard " << args->shard << ": observed " << partial->tensors.size() << " tensors on "
                << partial->samples << " samples -> " << args->options.output << "\n";
      return kExitOk;
    }
    const auto start = std::chrono::steady_clock::now();
    auto table = CalibrateFiles(args->options);
    bar.End();
    if (!table.ok()) return ReportError(table.status(), args->json);
    for (const auto& [name, values] : table->folded_inputs) {
      std::ostringstream os;
      os << name << "=";
      for (size_t i = 0; i < values.size(); ++i) os << (i ? "," : "") << values[i];
      const std::string spec = os.str();
      std::cerr << "sparq: --constant " << spec << " decided an If, which was folded before calibrating: the table is "
                << "for the model with " << spec << " only; quantize with it by `sparq quantize --constant " << spec
                << "` (or a recipe's data.constants)\n";
    }
    if (args->json) {
      nlohmann::json j;
      j["tensors"] = table->tensors.size();
      j["samples"] = table->samples;
      j["method"] = args->method;
      j["output"] = args->options.output;
      j["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      j["peak_rss_mib"] = std::round(PeakRssMiB());
      std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
      return kExitOk;
    }
    std::cout << "calibrated " << table->tensors.size() << " tensors on " << table->samples << " samples ("
              << args->method << ") -> " << args->options.output << "\n";
    return kExitOk;
  };
}

}  // namespace cli
}  // namespace sparq
