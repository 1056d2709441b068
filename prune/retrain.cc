// The retrain hook: the command that runs the user's training between
// pruning steps (MakeRetrainCommand), and the checks PruneModel applies to
// whatever model a hook returns.
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>

#include "core/process.h"
#include "prune/internal.h"
#include "sparq/file_io.h"
#include "sparq/onnx_io.h"
#include "sparq/prune_retrain.h"

namespace sparq {

namespace fs = std::filesystem;
using namespace prune_internal;  // NOLINT

const std::vector<std::string>& RetrainPlaceholders() {
  static const std::vector<std::string> names = {"model_in", "masks", "model_out", "step",
                                                 "steps",    "sparsity", "data", "work_dir"};
  return names;
}

namespace {

// Replaces each {name} of `text` by values[name] (quoted for the shell when
// `quote`); with `values` null, only checks the names.
Status Expand(const std::string& text, const std::map<std::string, std::string>* values, bool quote,
              std::string* out) {
  const auto& known = RetrainPlaceholders();
  std::string result;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
      result += c;
      ++i;
      continue;
    }
    if (c == '}') return Status::InvalidArgument("'" + text + "' has a '}' without its '{' (write }} for a brace)");
    if (c != '{') {
      result += c;
      continue;
    }
    const size_t end = text.find('}', i + 1);
    if (end == std::string::npos)
      return Status::InvalidArgument("'" + text + "' has a '{' without its '}' (write {{ for a brace)");
    const std::string name = text.substr(i + 1, end - i - 1);
    if (std::find(known.begin(), known.end(), name) == known.end())
      return Status::InvalidArgument("'" + text + "': unknown placeholder {" + name + "}; known: {" +
                                     JoinNames(known, 20) + "}");
    if (values) result += quote ? ShellQuote(values->at(name)) : values->at(name);
    i = end;
  }
  if (out) *out = result;
  return Status::OK();
}

// The last `max_lines` lines of a file, for messages.
std::string Tail(const std::string& path, size_t max_lines) {
  auto text = ReadFile(path);
  if (!text.ok() || text->empty()) return "";
  std::vector<std::string> lines;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string out;
  for (size_t i = lines.size() > max_lines ? lines.size() - max_lines : 0; i < lines.size(); ++i)
    out += "\n  | " + lines[i];
  return out;
}

std::string Joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    s += a.find_first_of(" \t'\"\\") == std::string::npos && !a.empty() ? a : ShellQuote(a);
  }
  return s;
}

// A fresh folder under the system's temporary folder, removed with the last
// copy of the hook.
struct WorkDir {
  std::string path;
  bool owned = false;
  ~WorkDir() {
    if (!owned) return;
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

StatusOr<std::string> MakeTempDir() {
  std::error_code ec;
  const fs::path base = fs::temp_directory_path(ec);
  if (ec) return Status::IOError("no temporary folder: " + ec.message());
  std::string pattern = (base / "sparq-retrain-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) return Status::IOError("cannot create a folder under " + base.string());
  return pattern;
}

}  // namespace

Status CheckRetrainCommand(const RetrainCommandOptions& o) {
  if (o.command.empty() || o.command[0].empty()) return Status::InvalidArgument("the retrain command is empty");
  if (o.shell && o.command.size() != 1)
    return Status::InvalidArgument("a shell command is one string, not a list of " + std::to_string(o.command.size()) +
                                   " arguments");
  if (!(o.timeout_seconds > 0)) return Status::InvalidArgument("the retrain timeout must be > 0 seconds");
  for (const std::string& arg : o.command) SPARQ_RETURN_IF_ERROR(Expand(arg, nullptr, false, nullptr));
  return Status::OK();
}

PruneRetrainFn MakeRetrainCommand(RetrainCommandOptions options) {
  auto dir = std::make_shared<WorkDir>();
  return [options = std::move(options), dir](const RetrainRequest& request) -> StatusOr<Model> {
    auto log = [&](const std::string& line) {
      if (options.log) options.log(line);
    };
    const std::string where = "retrain step " + std::to_string(request.step) + "/" + std::to_string(request.steps);
    SPARQ_RETURN_IF_ERROR(CheckRetrainCommand(options).WithContext(where));
    if (request.model == nullptr || request.masks == nullptr) return Status::InvalidArgument(where + ": no model or masks");
    if (dir->path.empty()) {
      if (options.work_dir.empty()) {
        SPARQ_ASSIGN_OR_RETURN(dir->path, MakeTempDir());
        dir->owned = true;
      } else {
        dir->path = options.work_dir;
      }
    }
    const fs::path step_dir = fs::path(dir->path) / ("step" + std::to_string(request.step));
    std::error_code ec;
    fs::remove_all(step_dir, ec);
    fs::create_directories(step_dir, ec);
    if (ec) return Status::IOError(where + ": cannot create " + step_dir.string() + ": " + ec.message());
    const std::map<std::string, std::string> values = {
        {"model_in", (step_dir / "model_in.onnx").string()},
        {"masks", (step_dir / "masks.npz").string()},
        {"model_out", (step_dir / "model_out.onnx").string()},
        {"step", std::to_string(request.step)},
        {"steps", std::to_string(request.steps)},
        {"sparsity", FormatNumber(request.target, 6)},
        {"data", options.data},
        {"work_dir", step_dir.string()}};
    SPARQ_RETURN_IF_ERROR(SaveModel(*request.model, values.at("model_in")).WithContext(where));
    SPARQ_RETURN_IF_ERROR(WriteNpz(values.at("masks"), *request.masks).WithContext(where));

    std::vector<std::string> argv;
    for (const std::string& arg : options.command) {
      std::string expanded;
      SPARQ_RETURN_IF_ERROR(Expand(arg, &values, options.shell, &expanded).WithContext(where));
      argv.push_back(expanded);
    }
    if (options.shell) argv = {"/bin/sh", "-c", argv[0]};
    const std::string shown = options.shell ? argv[2] : Joined(argv);
    log(where + ": " + shown);
    const std::string output = (step_dir / "output.log").string();
    StatusOr<ProcessResult> run = RunProcess(argv, output, options.timeout_seconds, options.working_dir);
    if (!run.ok()) return run.status().WithContext(where + ": command `" + shown + "`");
    // The program's output, line by line.
    if (auto text = ReadFile(output); text.ok()) {
      std::istringstream in(*text);
      for (std::string line; std::getline(in, line);) log(where + " | " + line);
    }
    const std::string tail = Tail(output, 10);
    const std::string kept = " (files kept in " + step_dir.string() + ")";
    if (run->timed_out) {
      return Status::InvalidArgument(where + ": command `" + shown + "` ran past its time limit of " +
                                     FormatNumber(options.timeout_seconds) + " s and was stopped" + kept + tail);
    }
    if (run->term_signal != 0) {
      return Status::InvalidArgument(where + ": command `" + shown + "` was ended by signal " +
                                     std::to_string(run->term_signal) + kept + tail);
    }
    if (run->exit_code != 0) {
      return Status::InvalidArgument(where + ": command `" + shown + "` exited with status " +
                                     std::to_string(run->exit_code) + kept + tail);
    }
    if (!fs::is_regular_file(values.at("model_out"), ec)) {
      return Status::NotFound(where + ": command `" + shown + "` exited 0 but did not write {model_out} " +
                              values.at("model_out") + kept + tail);
    }
    StatusOr<Model> out = LoadModel(values.at("model_out"));
    if (!out.ok()) return out.status().WithContext(where + ": reading the command's {model_out}" + kept);
    log(where + ": command done in " + FormatNumber(run->seconds, 3) + " s");
    fs::remove_all(step_dir, ec);
    return out;
  };
}

namespace prune_internal {

Status CheckRetrainedModel(const Model& before, const Model& after, const std::string& where) {
  auto names = [](const std::vector<ValueInfo>& v) {
    std::vector<std::string> out;
    for (const auto& i : v) out.push_back(i.name);
    return out;
  };
  if (names(before.graph.inputs) != names(after.graph.inputs) || names(before.graph.outputs) != names(after.graph.outputs))
    return Status::InvalidArgument(where + ": the retrained model's graph inputs or outputs differ from the model given");
  if (before.graph.nodes.size() != after.graph.nodes.size())
    return Status::InvalidArgument(where + ": the retrained model has " + std::to_string(after.graph.nodes.size()) +
                                   " nodes, the model given " + std::to_string(before.graph.nodes.size()));
  for (size_t i = 0; i < before.graph.nodes.size(); ++i) {
    const Node& a = before.graph.nodes[i];
    const Node& b = after.graph.nodes[i];
    if (a.name != b.name || a.op_type != b.op_type || a.inputs != b.inputs || a.outputs != b.outputs)
      return Status::InvalidArgument(where + ": the retrained model's node " + std::to_string(i) + " is " + b.op_type +
                                     " '" + b.name + "', the model given has " + a.op_type + " '" + a.name + "' there");
  }
  for (const auto& [name, t] : before.graph.initializers) {
    auto it = after.graph.initializers.find(name);
    if (it == after.graph.initializers.end())
      return Status::InvalidArgument(where + ": the retrained model has no weight '" + name + "'");
    if (it->second.dtype() != t.dtype() || it->second.shape() != t.shape())
      return Status::InvalidArgument(where + ": weight '" + name + "' is " + DataTypeName(it->second.dtype()) +
                                     ShapeToString(it->second.shape()) + " in the retrained model, " +
                                     DataTypeName(t.dtype()) + ShapeToString(t.shape()) + " in the model given");
  }
  for (const auto& [name, t] : after.graph.initializers)
    if (!before.graph.initializers.count(name))
      return Status::InvalidArgument(where + ": the retrained model has a weight '" + name + "' the model given has not");
  return Status::OK();
}

Tensor MaskAsWeight(const WeightedLayer& layer, const PruneMask& mask) {
  Tensor t(DataType::kUInt8, layer.weight_shape);
  uint8_t* p = t.data<uint8_t>();
  if (!layer.transposed_view) {
    std::copy(mask.keep.begin(), mask.keep.end(), p);
  } else {  // stored [cols, rows]
    for (int64_t r = 0; r < mask.rows; ++r)
      for (int64_t c = 0; c < mask.cols; ++c) p[c * mask.rows + r] = mask.keep[static_cast<size_t>(r * mask.cols + c)];
  }
  return t;
}

}  // namespace prune_internal
}  // namespace sparq
