// Sharded evaluation: what a shard's report carries besides the metrics, and
// the merge of every shard's report into the report of one run.
#include "evaluate/eval_shards.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

namespace sparq {
namespace {

using json = nlohmann::ordered_json;

// JSON has no NaN or infinity: they are written as null and read back as NaN.
json Num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

struct Reader {
  const json& j;
  std::string where;
  Status status;
  double Double(const char* key) {
    auto it = j.find(key);
    if (it != j.end() && it->is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (it == j.end() || !it->is_number()) return Fail(key), 0.0;
    return it->get<double>();
  }
  int64_t Int(const char* key) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer()) return Fail(key), 0;
    return it->get<int64_t>();
  }
  std::string String(const char* key) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return Fail(key), std::string();
    return it->get<std::string>();
  }
  bool Bool(const char* key) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_boolean()) return Fail(key), false;
    return it->get<bool>();
  }
  const json& Object(const char* key) {
    static const json kEmpty = json::object();
    auto it = j.find(key);
    if (it == j.end() || !(it->is_object() || it->is_array())) return Fail(key), kEmpty;
    return *it;
  }
  void Fail(const char* key) {
    if (status.ok()) status = Status::Corruption(where + ": field \"" + key + "\" is missing or has the wrong type");
  }
};

}  // namespace

std::string ShardSumsJson(const EvalReport& r) {
  json p;
  p["format"] = "sparq-eval-partial";
  p["version"] = 1;
  p["shard_ids"] = r.shard_ids;
  p["shards"] = r.shards;
  p["data_samples"] = r.data_samples;
  p["model"] = r.model;
  p["inputs"] = r.inputs;
  p["reference"] = r.reference;
  p["has_labels"] = r.has_labels;
  p["has_reference"] = r.has_reference;
  p["num_classes"] = r.num_classes;
  p["samples"] = r.samples;
  p["batches"] = r.batches;
  p["batch_size"] = r.batch_size;
  p["threads"] = r.threads;
  p["backend"] = r.backend;
  p["top1_correct"] = r.top1_correct;
  p["top5_correct"] = r.top5_correct;
  p["top1_agree"] = r.top1_agree;
  p["top1_rows"] = r.top1_rows;
  p["model_seconds"] = r.model_seconds;
  p["wall_seconds"] = r.wall_seconds;
  p["warmup_batches"] = r.latency.warmup_batches;
  p["timed_batches"] = r.latency.timed_batches;
  p["cpu_mean_seconds"] = r.latency.cpu_mean_seconds;
  p["batch_seconds"] = r.batch_seconds;
  json outs = json::array();
  for (size_t i = 0; i < r.output_stats.size() && i < r.comparisons.size(); ++i) {
    const ErrorStats::Sums s = r.output_stats[i].sums();
    outs.push_back({{"name", r.comparisons[i].name}, {"count", s.count}, {"ref_sq", Num(s.ref_sq)},
                    {"out_sq", Num(s.out_sq)}, {"err_sq", Num(s.err_sq)}, {"dot", Num(s.dot)},
                    {"max_abs_error", Num(s.max_abs_error)}});
  }
  p["outputs"] = outs;
  const ReferenceMetrics::Sums t = r.task.sums();
  const BoxOptions& b = r.task.box_options();
  p["task"] = {{"top5_sum", Num(t.top5_sum)},        {"top5_rows", t.top5_rows},
               {"cosine_sum", Num(t.cosine_sum)},    {"cosine_min", Num(t.cosine_min)},
               {"cosine_samples", t.cosine_samples}, {"ctc_samples", t.ctc_samples},
               {"ctc_chars", t.ctc_chars},           {"ctc_edits", t.ctc_edits},
               {"box_samples", t.box_samples},       {"reference_boxes", t.reference_boxes},
               {"candidate_boxes", t.candidate_boxes}, {"matched_boxes", t.matched_boxes},
               {"drift_sum", Num(t.drift_sum)},      {"score_ref_sq", Num(t.score_ref_sq)},
               {"score_err_sq", Num(t.score_err_sq)}, {"boxes", b.enabled},
               {"box_score_threshold", b.score_threshold}, {"box_nms_iou", b.nms_iou},
               {"box_match_iou", b.match_iou}};
  const MapOptions& mo = r.task.map_options();
  p["task"]["map"] = mo.enabled;
  p["task"]["map_threshold"] = mo.threshold;
  p["task"]["map_elements"] = t.map_elements;
  p["task"]["map_intersection"] = t.map_intersection;
  p["task"]["map_union"] = t.map_union;
  return p.dump();
}

StatusOr<EvalReport> EvalReport::FromShardJson(const std::string& text, const std::string& where) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::Corruption(where + ": not a JSON object (damaged or truncated?)");
  auto partial = j.find("partial");
  if (partial == j.end() || !partial->is_object() || partial->value("format", "") != "sparq-eval-partial") {
    return Status::Corruption(where + ": not the JSON report of a shard (sparq eval --shard i/n --json)");
  }
  if (partial->value("version", 0) != 1) return Status::NotSupported(where + ": eval partial version is not 1");
  Reader rd{*partial, where, Status::OK()};
  EvalReport r;
  r.shards = static_cast<int>(rd.Int("shards"));
  for (const json& id : rd.Object("shard_ids")) {
    if (!id.is_number_integer()) return Status::Corruption(where + ": \"shard_ids\" holds a non-integer");
    r.shard_ids.push_back(id.get<int>());
  }
  r.shard = r.shard_ids.empty() ? 0 : r.shard_ids[0];
  r.data_samples = rd.Int("data_samples");
  r.model = rd.String("model");
  r.inputs = rd.String("inputs");
  r.reference = rd.String("reference");
  r.has_labels = rd.Bool("has_labels");
  r.has_reference = rd.Bool("has_reference");
  r.num_classes = rd.Int("num_classes");
  r.samples = rd.Int("samples");
  r.batches = rd.Int("batches");
  r.batch_size = rd.Int("batch_size");
  r.threads = static_cast<int>(rd.Int("threads"));
  r.backend = rd.String("backend");
  r.top1_correct = rd.Int("top1_correct");
  r.top5_correct = rd.Int("top5_correct");
  r.top1_agree = rd.Int("top1_agree");
  r.top1_rows = rd.Int("top1_rows");
  r.model_seconds = rd.Double("model_seconds");
  r.wall_seconds = rd.Double("wall_seconds");
  r.latency.warmup_batches = rd.Int("warmup_batches");
  r.latency.timed_batches = rd.Int("timed_batches");
  r.latency.cpu_mean_seconds = rd.Double("cpu_mean_seconds");
  for (const json& s : rd.Object("batch_seconds")) {
    if (!s.is_number()) return Status::Corruption(where + ": \"batch_seconds\" holds a non-number");
    r.batch_seconds.push_back(s.get<double>());
  }
  for (const json& o : rd.Object("outputs")) {
    Reader ro{o, where + ": outputs", Status::OK()};
    ErrorStats::Sums s;
    const std::string name = ro.String("name");
    s.count = ro.Int("count");
    s.ref_sq = ro.Double("ref_sq"), s.out_sq = ro.Double("out_sq"), s.err_sq = ro.Double("err_sq");
    s.dot = ro.Double("dot"), s.max_abs_error = ro.Double("max_abs_error");
    SPARQ_RETURN_IF_ERROR(ro.status);
    r.comparisons.push_back({name, s.count, 0.0, 0.0, 0.0});
    r.output_stats.push_back(ErrorStats::FromSums(s));
  }
  Reader rt{rd.Object("task"), where + ": task", Status::OK()};
  ReferenceMetrics::Sums t;
  t.top5_sum = rt.Double("top5_sum"), t.top5_rows = rt.Int("top5_rows");
  t.cosine_sum = rt.Double("cosine_sum"), t.cosine_min = rt.Double("cosine_min");
  t.cosine_samples = rt.Int("cosine_samples");
  t.ctc_samples = rt.Int("ctc_samples"), t.ctc_chars = rt.Int("ctc_chars"), t.ctc_edits = rt.Int("ctc_edits");
  t.box_samples = rt.Int("box_samples"), t.reference_boxes = rt.Int("reference_boxes");
  t.candidate_boxes = rt.Int("candidate_boxes"), t.matched_boxes = rt.Int("matched_boxes");
  t.drift_sum = rt.Double("drift_sum"), t.score_ref_sq = rt.Double("score_ref_sq");
  t.score_err_sq = rt.Double("score_err_sq");
  BoxOptions b;
  b.enabled = rt.Bool("boxes");
  b.score_threshold = rt.Double("box_score_threshold");
  b.nms_iou = rt.Double("box_nms_iou");
  b.match_iou = rt.Double("box_match_iou");
  MapOptions mo;
  if (rt.j.contains("map")) {  // shard reports written before map_iou have none
    mo.enabled = rt.Bool("map");
    mo.threshold = rt.Double("map_threshold");
    t.map_elements = rt.Int("map_elements");
    t.map_intersection = rt.Int("map_intersection");
    t.map_union = rt.Int("map_union");
  }
  SPARQ_RETURN_IF_ERROR(rd.status);
  SPARQ_RETURN_IF_ERROR(rt.status);
  r.task = ReferenceMetrics::FromSums(b, t, mo);
  if (r.shards < 1 || r.shard_ids.empty()) return Status::Corruption(where + ": no shard ids");
  for (int id : r.shard_ids)
    if (id < 0 || id >= r.shards) return Status::Corruption(where + ": shard id outside [0, shards)");
  return r;
}

StatusOr<EvalReport> MergeEvalReports(const std::vector<EvalReport>& parts) {
  if (parts.empty()) return Status::InvalidArgument("merge: no shard reports given");
  std::vector<const EvalReport*> order;
  for (const EvalReport& p : parts) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(), [](const EvalReport* a, const EvalReport* b) {
    return (a->shard_ids.empty() ? 0 : a->shard_ids[0]) < (b->shard_ids.empty() ? 0 : b->shard_ids[0]);
  });
  const EvalReport& first = *order[0];
  EvalReport m;
  m.model = first.model, m.inputs = first.inputs, m.reference = first.reference;
  m.has_labels = first.has_labels, m.has_reference = first.has_reference;
  m.num_classes = first.num_classes, m.batch_size = first.batch_size, m.threads = first.threads;
  m.backend = first.backend;
  m.data_samples = first.data_samples;
  m.task = ReferenceMetrics(first.task.box_options(), first.task.map_options());
  m.output_stats.resize(first.output_stats.size());
  std::map<int, bool> seen;
  std::vector<double> timed;
  double cpu_seconds = 0.0;
  for (const EvalReport* p : order) {
    const std::string differs = "merge: the shard reports differ in ";
    if (p->model != first.model) return Status::InvalidArgument(differs + "model (" + p->model + " vs " + first.model + ")");
    if (p->reference != first.reference || p->has_reference != first.has_reference) {
      return Status::InvalidArgument(differs + "reference (" + p->reference + " vs " + first.reference + ")");
    }
    if (p->inputs != first.inputs || p->data_samples != first.data_samples || p->batch_size != first.batch_size) {
      return Status::InvalidArgument(differs + "data (inputs, samples or batch size)");
    }
    if (p->has_labels != first.has_labels || p->num_classes != first.num_classes) {
      return Status::InvalidArgument(differs + "labels");
    }
    if (p->shards != first.shards) return Status::InvalidArgument(differs + "shard count");
    const BoxOptions& a = p->task.box_options();
    const BoxOptions& b = first.task.box_options();
    if (a.enabled != b.enabled || a.score_threshold != b.score_threshold || a.nms_iou != b.nms_iou ||
        a.match_iou != b.match_iou) {
      return Status::InvalidArgument(differs + "box options");
    }
    if (p->task.map_options().enabled != first.task.map_options().enabled ||
        p->task.map_options().threshold != first.task.map_options().threshold) {
      return Status::InvalidArgument(differs + "map options (map_iou threshold)");
    }
    if (p->output_stats.size() != first.output_stats.size()) return Status::InvalidArgument(differs + "outputs");
    for (int id : p->shard_ids) {
      if (!seen.emplace(id, true).second) {
        return Status::InvalidArgument("merge: shard " + std::to_string(id) + " of " + std::to_string(first.shards) +
                                       " is given twice");
      }
    }
    m.samples += p->samples, m.batches += p->batches;
    m.top1_correct += p->top1_correct, m.top5_correct += p->top5_correct;
    m.top1_agree += p->top1_agree, m.top1_rows += p->top1_rows;
    m.model_seconds += p->model_seconds;
    m.wall_seconds = std::max(m.wall_seconds, p->wall_seconds);  // the shards ran side by side
    for (size_t i = 0; i < m.output_stats.size(); ++i) m.output_stats[i].Merge(p->output_stats[i]);
    m.task.Merge(p->task);
    const size_t warm = static_cast<size_t>(std::max<int64_t>(0, p->latency.warmup_batches));
    for (size_t i = warm; i < p->batch_seconds.size(); ++i) timed.push_back(p->batch_seconds[i]);
    m.latency.warmup_batches += p->latency.warmup_batches;
    m.batch_seconds.insert(m.batch_seconds.end(), p->batch_seconds.begin(), p->batch_seconds.end());
    cpu_seconds += p->latency.cpu_mean_seconds * static_cast<double>(p->latency.timed_batches);
  }
  std::string missing;
  for (int id = 0; id < first.shards; ++id)
    if (!seen.count(id)) missing += (missing.empty() ? "" : ", ") + std::to_string(id);
  if (!missing.empty()) {
    return Status::InvalidArgument("merge: shard(s) " + missing + " of " + std::to_string(first.shards) +
                                   " missing: give every shard's report");
  }
  if (first.data_samples > 0 && m.samples != first.data_samples) {
    return Status::InvalidArgument("merge: the shards evaluated " + std::to_string(m.samples) +
                                   " samples, the data holds " + std::to_string(first.data_samples));
  }
  for (const auto& [id, unused] : seen) m.shard_ids.push_back(id);
  const int64_t warmups = m.latency.warmup_batches;
  m.latency = ComputeLatency(timed, 0);
  m.latency.warmup_batches = warmups;
  if (m.latency.timed_batches > 0) m.latency.cpu_mean_seconds = cpu_seconds / static_cast<double>(m.latency.timed_batches);
  for (size_t i = 0; i < m.output_stats.size(); ++i) {
    const ErrorStats& s = m.output_stats[i];
    m.comparisons.push_back({first.comparisons[i].name, s.count(), s.sqnr_db(), s.cosine(), s.max_abs_error()});
  }
  return m;  // shards 0: the report of all the data
}

}  // namespace sparq
