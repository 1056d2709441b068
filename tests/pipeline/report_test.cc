// report.md is written to be pasted into a CI job summary.
#include <gtest/gtest.h>

#include "sparq/pipeline.h"

namespace sparq {
namespace {

RunReport FailedInt8Run() {
  RunReport r;
  r.name = "classifier-int8";
  r.output_model = "out/classifier.sparq.FAILED.onnx";
  r.metric = "top1";
  r.fp32_metric = 99.0;
  r.output_metric = 10.0;
  r.drop = 89.0;
  r.max_drop = 0.5;
  r.eval_samples = 512;
  r.layers = {{"conv1", "Conv", Precision::kINT8, "default"}, {"fc", "Gemm", Precision::kFP32, "rule 'fc'"}};
  r.warnings = {"first warning", "second warning"};
  return r;
}

TEST(RunReportMarkdown, VerdictFirstThenFoldedLayerTable) {
  const std::string md = FailedInt8Run().ToMarkdown();
  EXPECT_EQ(md.rfind("## sparq: classifier-int8 FAILED\n\n**Gate failed:** top1 99.00 -> 10.00, drop 89.00 > 0.50"
                     " (512 samples;",
                     0),
            0u)
      << md;
  EXPECT_NE(md.find("Model: `out/classifier.sparq.FAILED.onnx`"), std::string::npos) << md;
  EXPECT_NE(md.find("<details><summary>2 layers: 1 int8, 0 fp16, 1 fp32</summary>\n\n| layer |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| fc | Gemm | fp32 | rule 'fc' |\n\n</details>\n"), std::string::npos) << md;
  // Each warning its own quote block, not one run-on paragraph.
  EXPECT_NE(md.find("> warning: first warning\n\n> warning: second warning\n"), std::string::npos) << md;
}

TEST(RunReportMarkdown, PassedRunSaysSoInItsFirstTwoLines) {
  RunReport r = FailedInt8Run();
  r.passed = true;
  r.output_model = "out/classifier.sparq.onnx";
  const std::string md = r.ToMarkdown();
  EXPECT_EQ(md.rfind("## sparq: classifier-int8 passed\n\n**Gate passed:** ", 0), 0u) << md;
}

}  // namespace
}  // namespace sparq
