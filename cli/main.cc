// Entry point of the `sparq` command line tool: parses the arguments and runs
// the chosen subcommand (see cli/commands.h).
#include <memory>
#include <vector>

#include <cstring>
#include <nlohmann/json.hpp>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "cli/commands.h"
#include "sparq/version.h"

namespace sparq {
namespace cli {

int ReportError(const Status& status, bool json) {
  if (json) {
    nlohmann::json j;
    j["schema_version"] = kJsonSchemaVersion;
    j["sparq_version"] = Version();
    j["error"] = {{"code", StatusCodeName(status.code())}, {"message", status.message()}};
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  }
  return ReportError(status);
}

}  // namespace cli
}  // namespace sparq

namespace {

constexpr const char* kExamples = R"(Examples:
  sparq run recipes/quickstart.yaml
  sparq recipe check my_recipe.yaml --print
  sparq calibrate model.onnx --data calib.npz --method kl -o scales.json
  sparq quantize model.onnx --scales scales.json -o model.int8.onnx
  sparq inspect resnet18.onnx
  sparq inspect resnet18.onnx --json
  sparq eval resnet18.onnx --inputs val.npz --labels val_labels.npy --batch 32
  sparq eval pruned.onnx --inputs val_folder/ --reference resnet18.onnx --save-outputs out.npz
  sparq compare resnet18.onnx resnet18.int8.onnx --inputs val.npz --limit 64 --plot sqnr.svg
  sparq sensitivity model.onnx --data calib.npz --structure block4x4 --sparsities 0.3,0.5,0.7,0.9
  sparq <command> --help      (options of one command)

Exit status: 0 on success, 1 when `sparq run`'s gate fails (a limit of
evaluate.gate not met, or prune.sparsity not reached), 2 on any error (message on
stderr as "sparq: error: ..."; with --json also a JSON object on stdout).)";

}  // namespace

int main(int argc, char** argv) {
  using namespace sparq::cli;
#if defined(__GLIBC__)
  // The process is ours (the library leaves the allocator alone): keep large
  // freed buffers for reuse. glibc maps each block above 32 MiB afresh and
  // unmaps it when freed, so every batch of a calibration or an evaluation
  // faulted its activations in again (EfficientNet-Lite0, batch 8: 72k page
  // faults -> 55k, 5% less CPU for `sparq calibrate`; peak RSS the same).
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
  CLI::App app("sparq: compress ONNX models and run them with sparq's own executor.", "sparq");
  // The version of the library that was loaded (the installed tree's, found
  // through the RPATH): one source with include/sparq/version.h.
  app.set_version_flag("--version", std::string("sparq ") + sparq::Version());
  app.footer(kExamples);
  app.require_subcommand(1);

  std::vector<std::pair<CLI::App*, RunFn>> commands;
  auto add = [&](RunFn (*adder)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    RunFn run = adder(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(run));
  };
  add(AddRunCommand);
  add(AddRecipeCommand);
  add(AddCalibrateCommand);
  add(AddQuantizeCommand);
  add(AddInspectCommand);
  add(AddEvalCommand);
  add(AddConvertCommand);
  add(AddSensitivityCommand);
  add(AddCompareCommand);

  // CLI11 would report a misspelled command as "A subcommand is required".
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const auto& [sub, run] : commands) {
      found = found || sub->get_name() == argv[1];
      known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    if (!found) {
      ReportError("unknown command '" + std::string(argv[1]) + "' (commands: " + known + ")");
      std::cerr << "Run 'sparq --help' for usage." << std::endl;
      return kExitError;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    bool json = false;
    for (int i = 1; i < argc; ++i) json |= std::strcmp(argv[i], "--json") == 0;
    ReportError(sparq::Status::InvalidArgument(e.what()), json);
    std::cerr << "Run 'sparq --help' for usage." << std::endl;
    return kExitError;
  }
  for (auto& [sub, run] : commands) {
    if (sub->parsed()) return run();
  }
  return ReportError("no command given");
}
