// `sparq quantize MODEL --scales scales.json -o out.onnx`: quantizes with a
// calibration table written earlier (calibrate once, quantize many times;
// sparq::QuantizeFiles); `--precision int4`: weight-only INT4, no table.
#include <memory>

#include "cli/commands.h"
#include "sparq/commands.h"

namespace sparq {
namespace cli {

RunFn AddQuantizeCommand(CLI::App& app) {
  struct Args {
    QuantizeFilesOptions options;
    std::string precision = "int8";
    std::string format;  // qdq (int8) / matmulnbits (int4) when not given
    std::string method = "rtn";
    std::string rounding = "nearest";
    bool per_tensor = false;
    bool json = false;
    std::vector<std::string> constants;  // --constant name=value, parsed when run
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("quantize", "Quantize a model with a calibration table written earlier "
                                                 "(by `sparq calibrate` or a recipe's output.scales)");
  sub->add_option("model", args->options.model, "FP32 ONNX model (the one the table was calibrated on)")->required();
  sub->add_option("--scales", args->options.scales, "Calibration table (JSON) to quantize with (not with int4)");
  sub->add_option("-o,--output", args->options.output, "Quantized model to write (never the input model)")->required();
  sub->add_option("--precision", args->precision,
                  "int8 | fp16 | mixed (INT8 layers, FP16 elsewhere) | fp8 (FP8 E4M3 Q/DQ, opset 19) | int4 (weight-only "
                  "MatMul/Gemm blocks, no table)")
      ->capture_default_str();
  sub->add_option("--format", args->format,
                  "qdq | qoperator (int8; default qdq); matmulnbits | qdq (int4: com.microsoft.MatMulNBits, default, or "
                  "opset-21 blocked DequantizeLinear)");
  sub->add_option("--block-size", args->options.int4_options.block_size, "int4: weights per scale along K (16..256)")
      ->capture_default_str();
  sub->add_flag("--symmetric", args->options.int4_options.symmetric, "int4: int4 codes without zero points");
  sub->add_option("--method", args->method, "int4: rtn | gptq | awq (gptq and awq read --data)")->capture_default_str();
  sub->add_option("--data", args->options.data,
                  "int4 gptq / awq, int8 --rounding adaround: calibration inputs (.npz or a folder of .npy)");
  sub->add_option("--batch-size", args->options.batch_size, "with --data: samples per batch")->capture_default_str();
  sub->add_option("--samples", args->options.samples, "with --data: the first N samples of --data (0 = all)");
  sub->add_option("--rounding", args->rounding,
                  "int8 weights: nearest | adaround (AdaRound fitted on --data, QDQ only)")->capture_default_str();
  sub->add_option("--adaround-iterations", args->options.adaround_options.iterations,
                  "--rounding adaround: Adam steps per layer")->capture_default_str();
  sub->add_flag("--per-tensor,!--per-channel", args->per_tensor,
                "One scale per weight tensor instead of one per output channel (default: per channel)");
  AddConstantOption(sub, &args->constants);
  sub->add_flag("--json", args->json, "Print each layer's precision as JSON on stdout");
  sub->add_flag("--external-data", args->options.external_data,
                "Store the weights in <output>.data beside the model (for models over 2 GB)");
  sub->footer(R"(Examples:
  sparq calibrate model.onnx --data calib.npz --method kl -o scales.json
  sparq quantize model.onnx --scales scales.json -o model.int8.onnx
  sparq quantize model.onnx --scales scales.json --per-tensor --format qoperator -o model.qop.onnx
  sparq quantize model.onnx --scales scales.json --precision mixed -o model.mixed.onnx
  sparq quantize model.onnx --scales scales.json --precision fp8 -o model.fp8.onnx
  sparq quantize model.onnx --precision int4 -o model.q4.onnx
  sparq quantize model.onnx --precision int4 --method gptq --data calib.npz --block-size 128 -o model.q4.onnx
  sparq calibrate vad.onnx --data chunks.npz --constant sr=16000 -o scales.json
  sparq quantize vad.onnx --scales scales.json --constant sr=16000 -o vad.int8.onnx

--constant pins an input as `sparq calibrate --constant` and a recipe's
data.constants do: an If it decides is folded (its taken branch inlined) and
the input leaves the written model. The pins must be those the table was
calibrated with (it records them); a pin that folds no If is an error.

INT4 needs no table; every other precision needs --scales.
The table must hold a range for every tensor the quantizer needs (each INT8
layer's input and output): else exit 2 naming the first missing tensor.
Tensors of the table the model does not have are a warning.
Exit status: 0 written, 2 error.)");
  return [args]() {
    StatusOr<std::map<std::string, std::vector<double>>> constants = ParseConstants(args->constants);
    if (!constants.ok()) return ReportError(constants.status(), args->json);
    args->options.constants = std::move(*constants);
    QuantizeOptions& q = args->options.quantize;
    if (args->precision == "int4") {
      Int4Options& o = args->options.int4_options;
      args->options.int4 = true;
      if (args->method == "rtn") o.method = Int4Method::kRtn;
      else if (args->method == "gptq") o.method = Int4Method::kGptq;
      else if (args->method == "awq") o.method = Int4Method::kAwq;
      else return ReportError(Status::InvalidArgument("--method must be rtn, gptq or awq, got '" + args->method + "'"), args->json);
      if (args->format.empty() || args->format == "matmulnbits") o.format = Int4Format::kMatMulNBits;
      else if (args->format == "qdq") o.format = Int4Format::kQdq;
      else return ReportError(Status::InvalidArgument("--format must be matmulnbits or qdq with int4, got '" + args->format + "'"), args->json);
      auto result = QuantizeFiles(args->options);
      if (!result.ok()) return ReportError(result.status(), args->json);
      for (const auto& f : result->folded_ifs) std::cerr << "sparq: fold If " << f << "\n";
      for (const auto& w : result->report.warnings) std::cerr << "sparq: warning: " << w << "\n";
      int quantized = 0;
      for (const auto& l : result->report.layers) quantized += l.reason.rfind("int4", 0) == 0;
      if (args->json) {
        std::cout << result->ToJson() << std::flush;
      } else {
        std::cout << "weighted layers: " << quantized << " int4 (" << args->method << ", block " << o.block_size << "), "
                  << result->report.layers.size() - quantized << " float -> " << args->options.output << "\n";
      }
      return kExitOk;
    }
    if (args->options.scales.empty())
      return ReportError(Status::InvalidArgument("--scales is required with --precision " + args->precision), args->json);
    if (args->precision == "int8") {
      q.precision = Precision::kINT8;
    } else if (args->precision == "fp16") {
      q.precision = Precision::kFP16;
    } else if (args->precision == "mixed") {
      q.precision = Precision::kINT8;
      q.other_precision = Precision::kFP16;
    } else if (args->precision == "fp8") {
      q.precision = Precision::kINT8;
      q.fp8 = true;
    } else {
      return ReportError(Status::InvalidArgument("--precision must be int8, fp16, mixed, fp8 or int4, got '" + args->precision + "'"),
                         args->json);
    }
    if (args->format.empty() || args->format == "qdq") {
      q.format = QuantFormat::kQDQ;
    } else if (args->format == "qoperator") {
      q.format = QuantFormat::kQOperator;
    } else {
      return ReportError(Status::InvalidArgument("--format must be qdq or qoperator, got '" + args->format + "'"),
                         args->json);
    }
    q.per_channel = !args->per_tensor;
    if (args->rounding == "adaround") args->options.adaround = true;
    else if (args->rounding != "nearest")
      return ReportError(Status::InvalidArgument("--rounding must be nearest or adaround, got '" + args->rounding + "'"),
                         args->json);
    auto result = QuantizeFiles(args->options);
    if (!result.ok()) return ReportError(result.status(), args->json);
    for (const auto& f : result->folded_ifs) std::cerr << "sparq: fold If " << f << "\n";
    if (!result->opset_upgrade.empty()) std::cerr << "sparq: " << result->opset_upgrade << "\n";
    for (const auto& w : result->report.warnings) std::cerr << "sparq: warning: " << w << "\n";
    int count[3] = {0, 0, 0};  // int8, fp16, fp32 weighted layers
    for (const auto& l : result->report.layers)
      ++count[l.precision == Precision::kINT8 ? 0 : l.precision == Precision::kFP16 ? 1 : 2];
    if (args->json) {
      std::cout << result->ToJson() << std::flush;
    } else {
      std::cout << "weighted layers: " << count[0] << (q.fp8 ? " fp8, " : " int8, ") << count[1] << " fp16, " << count[2] << " fp32 (table "
                << args->options.scales << ", " << result->calibration << ") -> " << args->options.output << "\n";
    }
    return kExitOk;
  };
}

}  // namespace cli
}  // namespace sparq
