// `sparq eval MODEL --inputs DATA ...`: runs the model over a dataset and
// reports accuracy, agreement with a reference model, throughput and latency
// percentiles (sparq::Evaluate); optionally a Chrome trace of every node run.
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/progress.h"
#include "sparq/evaluate.h"
#include "sparq/file_io.h"

namespace sparq {
namespace cli {
RunFn AddEvalCommand(CLI::App& app) {
  struct Args {
    std::string model;
    EvalOptions options;
    bool json = false;
    bool progress = false;
    std::vector<std::string> constants;  // --constant name=value, parsed when run
    std::string shard;                   // --shard i/n
    std::vector<std::string> merge;      // --merge: shard reports
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "eval", "Run a model over a dataset: top-1/top-5 accuracy, agreement with a reference model, throughput, latency");
  sub->add_option("model", args->model, "ONNX model file (not with --merge)");
  sub->add_option("--inputs", args->options.inputs,
                  "Dataset: .npz keyed by input name, .npy (single-input model), or a folder of them "
                  "(concatenated in name order along the first axis)");
  sub->add_option("--shard", args->shard,
                  "Evaluate only shard i of n of the data (contiguous whole batches; docs/scale.md); with --json the "
                  "report carries the sums that --merge adds up")
      ->type_name("i/n");
  sub->add_option("--merge", args->merge,
                  "Merge the --json reports of every shard of one evaluation into the report of one run (counts "
                  "exact; SQNR and cosine from summed squares)")
      ->type_name("REPORT...");
  sub->add_option("--labels", args->options.labels, "Integer class ids (.npy), one per sample: top-1/top-5 of output 0");
  sub->add_option("--reference", args->options.reference,
                  "Reference model run on the same batches: top-1 agreement, SQNR, cosine, max abs error");
  sub->add_option("--save-outputs", args->options.save_outputs, "Write every graph output to this .npz, samples along the first axis of each array");
  sub->add_option("--batch", args->options.batch,
                  "Samples per run (default: the model's fixed batch dim, else 1)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--threads", args->options.threads, "Executor threads (default: one per hardware thread)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--backend", args->options.backend,
                  "Where the model runs: cpu (default), cuda (a GPU; an error without one), auto (cuda when a GPU "
                  "is there, else cpu), reference (kernels/ref alone). Nodes the backend cannot run go to the CPU, "
                  "with copies between devices (listed by --verbose)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto", "reference"}));
  sub->add_flag("--tf32", args->options.allow_tf32,
                "On a GPU backend, run float32 MatMul / Gemm / Conv on tensor cores with TF32 inputs (10-bit "
                "mantissa products: about 6x faster on an H100/H200, less exact); the CPU ignores it");
  sub->add_flag("--no-memory-plan", [args](int64_t) { args->options.plan_memory = false; },
                "Give every node output a buffer of its own instead of one arena per run planned per input shapes "
                "(same results; for comparing speed and memory)");
  AddConstantOption(sub, &args->constants);
  sub->add_option("--limit", args->options.limit, "Evaluate at most N samples")->check(CLI::PositiveNumber);
  sub->add_flag("--json", args->json, "Print one JSON object instead of text");
  sub->add_flag("--verbose", args->options.list_kernels, "Also list the kernel that ran each node");
  sub->add_flag("--profile", args->options.profile, "Also time each operator and kernel (summed over all batches)");
  sub->add_option("--warmup", args->options.warmup,
                  "Batches run first and left out of the latency percentiles (default 1; they still count in "
                  "throughput and accuracy)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--trace", args->options.trace,
                  "Write a Chrome trace JSON (chrome://tracing, ui.perfetto.dev): one event per node run, "
                  "named after the node, category = op type, args = kernel and batch");
  CLI::Option* reference_kernels = sub->add_flag("--reference-kernels", args->options.reference_kernels,
                "Run every node on the reference kernels (kernels/ref) and QDQ models as their float graph, "
                "not the fast CPU kernels with QDQ patterns fused into integer operators");
  sub->add_flag("--fused-graph", args->options.fused_graph,
                "With --reference-kernels: run the fused graph that the fast kernels run (QDQ patterns as integer "
                "operators), so that outputs compare kernel for kernel with a fast run")
      ->needs(reference_kernels);
  sub->add_flag("--fp16-as-fp32", args->options.fp16_as_fp32,
                "Run float16 models in float32 without rounding inside the graph (default: float32 kernels with "
                "each float16 value rounded to float16 between operators, as onnxruntime does on a CPU)");
  sub->add_option("--kernel-table", args->options.kernel_table,
                  "Kernel speed table CSV (bench/kernel_speedups.csv format): pruned INT8 layers run a sparse "
                  "kernel only where it says the structure beats dense (default: the table built into sparq)");
  sub->add_option("--output", args->options.output,
                  "The graph output the metrics read (agreement, top-1/top-5, SQNR and cosine lines, task metrics); "
                  "listed first (default: the model's first output)");
  CLI::Option* boxes = sub->add_flag(
      "--boxes", args->options.boxes.enabled,
      "With --reference: read output 0 as a YOLO-style detector's [N, 4 + classes, anchors] (cx, cy, w, h, class "
      "scores), decode boxes (score threshold, class-agnostic NMS) and report the reference's boxes matched at IoU "
      ">= 0.5 with the same class, precision, score drift and the class-score SQNR");
  sub->add_option("--box-score-threshold", args->options.boxes.score_threshold,
                  "With --boxes: an anchor is a box when its best class score is >= this (default 0.25, "
                  "Ultralytics' conf)")
      ->needs(boxes);
  sub->add_option("--box-nms-iou", args->options.boxes.nms_iou,
                  "With --boxes: NMS drops a box overlapping a higher-scoring one by IoU > this (default 0.7, "
                  "Ultralytics' iou)")
      ->needs(boxes);
  sub->add_option_function<double>(
      "--map-threshold",
      [args](double t) {
        args->options.map.enabled = true;
        args->options.map.threshold = t;
      },
      "With --reference: read output 0 as a probability map and report the IoU of {reference > T} and "
      "{model > T} over every element (T in (0, 1); the recipe metric map_iou)");
  sub->add_flag("--progress", args->progress, "Show a progress bar even when stderr is not a terminal");
  sub->footer(R"(Examples:
  sparq eval resnet18.onnx --inputs val.npz --labels val_labels.npy --batch 32
  sparq eval pruned.onnx --inputs val_folder/ --reference resnet18.onnx --json
  sparq eval int8.onnx --inputs x.npz --reference-kernels --fused-graph --save-outputs ref.npz
  sparq eval int8.onnx --inputs x.npz --backend auto --verbose
  sparq eval model.onnx --inputs x.npy --save-outputs outputs.npz --limit 100
  sparq eval int8.onnx --inputs x.npz --batch 1 --warmup 10 --profile --trace int8_trace.json
  sparq eval yolov8n_int8.onnx --inputs photos.npz --reference yolov8n.onnx --boxes --box-nms-iou 0.45
  sparq eval pitch_int8.onnx --inputs audio.npz --reference pitch.onnx --output notes --map-threshold 0.3

  sparq eval vad.onnx --inputs audio.npz --constant sr=16000 --batch 8
  sparq eval int8.onnx --inputs val.npz --reference fp32.onnx --batch 32 --shard 0/4 --json > part-0.json
  sparq eval --merge part-0.json part-1.json part-2.json part-3.json --json

Data: arrays hold samples along their first axis; a folder's .npy/.npz files are read
in name order. Each input's batch axis comes from the model's shape: an input
declared [2, batch, 128] takes file arrays [S, 2, 128], moved to [2, B, 128]; a
scalar (or fixed-shape input of a dynamic-batch model) has no batch axis: its
array holds exactly its shape, or --constant pins it. Data that does not fit is
an error naming the input. Labels are int64/int32 class ids, scored against output 0.)");
  return [args]() {
    if (!args->merge.empty()) {
      if (!args->model.empty() || !args->options.inputs.empty() || !args->shard.empty()) {
        return ReportError(Status::InvalidArgument("--merge takes only the shard reports (and --json)"), args->json);
      }
      std::vector<EvalReport> parts;
      for (const std::string& path : args->merge) {
        StatusOr<std::string> text = ReadFile(path);
        if (!text.ok()) return ReportError(text.status(), args->json);
        StatusOr<EvalReport> part = EvalReport::FromShardJson(*text, path);
        if (!part.ok()) return ReportError(part.status(), args->json);
        parts.push_back(std::move(part).value());
      }
      StatusOr<EvalReport> merged = MergeEvalReports(parts);
      if (!merged.ok()) return ReportError(merged.status(), args->json);
      std::cout << (args->json ? merged->ToJson() + "\n" : merged->ToText());
      return kExitOk;
    }
    if (args->model.empty() || args->options.inputs.empty()) {
      return ReportError(Status::InvalidArgument("eval needs a model and --inputs (or --merge REPORT...)"), args->json);
    }
    if (!args->shard.empty()) {
      StatusOr<std::pair<int, int>> shard = ParseShard(args->shard);
      if (!shard.ok()) return ReportError(shard.status().WithContext("--shard"), args->json);
      if (!args->json) {
        return ReportError(Status::InvalidArgument("--shard needs --json: the merge reads the shard's JSON report"),
                           false);
      }
      args->options.shard = shard->first;
      args->options.shards = shard->second;
    }
    const bool show_progress = args->progress || isatty(STDERR_FILENO);
    ProgressBar bar;
    if (show_progress) {
      args->options.on_progress = [&bar](const EvalProgress& p) { bar.Update("evaluate", p.done, p.total, "samples", p.seconds); };
    }
    StatusOr<std::map<std::string, std::vector<double>>> constants = ParseConstants(args->constants);
    if (!constants.ok()) return ReportError(constants.status(), args->json);
    args->options.constants = std::move(*constants);
    auto report = Evaluate(args->model, args->options);
    bar.End();
    if (!report.ok()) return ReportError(report.status(), args->json);
    std::cout << (args->json ? report->ToJson() + "\n" : report->ToText());
    return kExitOk;
  };
}

}  // namespace cli
}  // namespace sparq
