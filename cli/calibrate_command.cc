// `sparq calibrate MODEL --data DATA [--method kl] -o scales.json`: observes
// activations and writes the calibration table (sparq::Calibrate).
#include <memory>

#include "cli/commands.h"
#include "runtime/dataset.h"
#include "sparq/calibrate.h"
#include "sparq/onnx_io.h"

namespace sparq {
namespace cli {

RunFn AddCalibrateCommand(CLI::App& app) {
  struct Args {
    std::string model, data, output, method = "kl", trt_cache, trt_version = "8601";
    CalibrationOptions options;
    int64_t batch = 32;
    int64_t samples = 0;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("calibrate", "Observe activations over sample data and write a calibration table "
                                                  "(and optionally a TensorRT calibration cache)");
  sub->add_option("model", args->model, "FP32 ONNX model")->required();
  sub->add_option("--data", args->data, "Calibration data: .npz keyed by input name, .npy, or a folder")->required();
  sub->add_option("-o,--output", args->output, "Calibration table to write (JSON)")->required();
  sub->add_option("--method", args->method, "max | kl | percentile | mse")->capture_default_str();
  sub->add_option("--percentile", args->options.percentile, "Percentile for --method percentile")->capture_default_str();
  sub->add_option("--bins", args->options.bins, "Histogram bins")->capture_default_str();
  sub->add_flag("!--asymmetric", args->options.symmetric, "uint8 ranges with a zero point instead of symmetric int8");
  sub->add_option("--batch", args->batch, "Samples per batch")->capture_default_str();
  sub->add_option("--samples", args->samples, "Use at most this many samples (0 = all)")->capture_default_str();
  sub->add_option("--threads", args->options.threads, "Threads (0 = all)")->capture_default_str();
  sub->add_option("--trt-cache", args->trt_cache,
                  "Also write a TensorRT calibration cache here (methods kl and max, symmetric tables only)");
  sub->add_option("--trt-version", args->trt_version, "TensorRT version in the cache header (8601 = 8.6.1)")
      ->capture_default_str();
  sub->footer(R"(Examples:
  sparq calibrate model.onnx --data calib.npz --method kl -o scales.json
  sparq calibrate model.onnx --data calib/ --method percentile --percentile 99.99 -o scales.json
  sparq calibrate model.onnx --data calib.npz --method max -o scales.json --trt-cache calib.cache --trt-version 8601)");
  return [args]() {
    auto method = ParseCalibrationMethod(args->method);
    if (!method.ok()) return ReportError(method.status());
    args->options.method = *method;
    if (args->batch < 1) return ReportError("--batch must be >= 1");
    auto model = LoadModel(args->model);
    if (!model.ok()) return ReportError(model.status());
    if (model->graph.inputs.empty()) return ReportError(args->model + ": the model has no inputs");
    auto data = Dataset::Open(args->data, model->graph.inputs, model->graph.initializer_inputs);
    if (!data.ok()) return ReportError(data.status());
    int64_t seen = 0;
    BatchFn next = [&](TensorMap* batch) -> StatusOr<bool> {
      if (args->samples > 0 && seen >= args->samples) return false;
      int64_t want = args->batch;
      const ValueInfo& in = model->graph.inputs[0];
      if (in.has_shape && !in.dims.empty() && in.dims[0].known()) want = in.dims[0].value;
      if (args->samples > 0) want = std::min(want, args->samples - seen);
      int64_t rows = 0;
      SPARQ_RETURN_IF_ERROR((*data)->Next(want, batch, &rows));
      seen += rows;
      return rows > 0;
    };
    auto table = Calibrate(*model, next, args->options);
    if (!table.ok()) return ReportError(table.status());
    Status st = table->Save(args->output);
    if (!st.ok()) return ReportError(st);
    if (!args->trt_cache.empty()) {
      st = table->CheckTensorRtCache();
      if (st.ok()) st = WriteFileAtomically(args->trt_cache, table->ToTensorRtCache(args->trt_version));
      if (!st.ok()) return ReportError(st);
    }
    std::cout << "calibrated " << table->tensors.size() << " tensors on " << table->samples << " samples ("
              << args->method << ") -> " << args->output << "\n";
    return kExitOk;
  };
}

}  // namespace cli
}  // namespace sparq
