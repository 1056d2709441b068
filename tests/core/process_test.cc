// RunProcess (no shell, time limit, output file) and SplitCommandLine.
#include "core/process.h"

#include <gtest/gtest.h>

#include "sparq/file_io.h"
#include "test_util.h"

namespace sparq {
namespace {

TEST(Process, RunsWithoutAShellAndCapturesBothStreams) {
  testing::TempDir dir;
  // The '$HOME' and ';' reach the program as they are: no shell expands them.
  auto r = RunProcess({"sh", "-c", "echo out \"$0\"; echo err >&2; exit 3", "$HOME;x"}, dir.path("out.log"), 30);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_FALSE(r->timed_out);
  auto text = ReadFile(dir.path("out.log"));
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "out $HOME;x\nerr\n");
}

TEST(Process, StopsAProgramPastItsTimeLimit) {
  testing::TempDir dir;
  auto r = RunProcess({"sleep", "30"}, dir.path("out.log"), 0.2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_NE(r->term_signal, 0);
  EXPECT_LT(r->seconds, 10.0);  // a bound on a hang, not a timing assertion
}

TEST(Process, ErrorsNameWhatCouldNotStart) {
  testing::TempDir dir;
  auto missing = RunProcess({"sparq-no-such-program"}, dir.path("out.log"), 5);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("sparq-no-such-program"), std::string::npos);
  EXPECT_FALSE(RunProcess({}, dir.path("out.log"), 5).ok());
  EXPECT_FALSE(RunProcess({"true"}, dir.path("out.log"), 0).ok());
  EXPECT_EQ(RunProcess({"true"}, dir.path("no/such/dir/out.log"), 5).status().code(), StatusCode::kIOError);
}

TEST(Process, SplitsCommandLinesLikeShellWords) {
  auto w = SplitCommandLine("python3  'my script.py' --in \"a \\\"b\\\"\" c\\ d {model_in}");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(*w, (std::vector<std::string>{"python3", "my script.py", "--in", "a \"b\"", "c d", "{model_in}"}));
  EXPECT_EQ(*SplitCommandLine("a ''"), (std::vector<std::string>{"a", ""}));
  EXPECT_FALSE(SplitCommandLine("a 'b").ok());
  EXPECT_FALSE(SplitCommandLine("a \"b").ok());
  EXPECT_FALSE(SplitCommandLine("a \\").ok());
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
}

}  // namespace
}  // namespace sparq
