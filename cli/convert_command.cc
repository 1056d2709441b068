// `sparq convert IN -o OUT [--external-data]`: loads and saves a model
// (round trip; moves weights into or out of an external data file).
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "sparq/onnx_io.h"

namespace sparq {
namespace cli {

RunFn AddConvertCommand(CLI::App& app) {
  struct Args {
    std::string input, output;
    SaveOptions options;
    bool force = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("convert", "Load an ONNX model and save it again (optionally with its weights in "
                                                "an external data file)");
  sub->add_option("model", args->input, "Input ONNX model")->required();
  sub->add_option("-o,--output", args->output, "Output ONNX model")->required();
  sub->add_flag("--external-data", args->options.external_data, "Store weights in <output>.data beside the model");
  sub->add_flag("-f,--force", args->force, "Replace an existing output file");
  sub->footer(R"(Examples:
  sparq convert model.onnx -o roundtrip.onnx
  sparq convert big.onnx -o big_ext.onnx --external-data)");
  return [args]() {
    std::error_code ec;
    if (std::filesystem::exists(args->output, ec) && std::filesystem::equivalent(args->input, args->output, ec)) {
      return ReportError("output " + args->output + " is the input model: sparq does not overwrite its input");
    }
    auto model = LoadModel(args->input);
    if (!model.ok()) return ReportError(model.status());
    args->options.overwrite = args->force;
    Status st = SaveModel(*model, args->output, args->options);
    if (!st.ok()) return ReportError(st.message() + (args->force ? "" : " (use --force to replace it)"));
    std::cout << "wrote " << args->output << "\n";
    return kExitOk;
  };
}

}  // namespace cli
}  // namespace sparq
