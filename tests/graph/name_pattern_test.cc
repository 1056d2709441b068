#include "graph/name_pattern.h"

#include <gtest/gtest.h>

namespace sparq {
namespace {

TEST(NamePattern, ExactNameOrWholeNameRegex) {
  EXPECT_TRUE(NameMatches("conv1", "conv1"));
  EXPECT_TRUE(NameMatches("conv[0-9]+", "conv12"));
  EXPECT_FALSE(NameMatches("conv", "conv1"));    // the regex must match the whole name
  EXPECT_FALSE(NameMatches("onv1", "conv1"));
  EXPECT_TRUE(NameMatches("/layer.0/fc", "/layer.0/fc"));
  EXPECT_TRUE(NameMatches("/layer.0/fc", "/layerX0/fc"));  // '.' is a regex wildcard
}

TEST(NamePattern, AnInvalidRegexMatchesOnlyItsText) {
  NamePattern p("fc(1");
  EXPECT_FALSE(p.valid_regex());
  EXPECT_FALSE(p.regex_error().empty());
  EXPECT_TRUE(p.Matches("fc(1"));
  EXPECT_FALSE(p.Matches("fc1"));
  EXPECT_TRUE(NamePattern("fc1").valid_regex());
  EXPECT_TRUE(NamePattern("fc1").regex_error().empty());
}

TEST(NamePattern, CheckNamesTheOption) {
  EXPECT_TRUE(CheckNamePattern("conv.*", "prune.layers[0].match").ok());
  const Status empty = CheckNamePattern("", "prune.layers[0].match");
  EXPECT_EQ(empty.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty.message().find("prune.layers[0].match"), std::string::npos);
  const Status bad = CheckNamePattern("fc(1", "sensitivity layers");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("sensitivity layers: 'fc(1' is not a valid regular expression"), std::string::npos);
}

TEST(NamePattern, EscapedTextMatchesExactlyItself) {
  const std::string name = "/blocks.0/conv(a)[1]+x?";
  const std::string escaped = EscapeRegex(name);
  NamePattern p(escaped);
  EXPECT_TRUE(p.valid_regex());
  EXPECT_TRUE(p.Matches(name));
  EXPECT_FALSE(p.Matches("/blocksX0/conv(a)[1]+x?"));
  EXPECT_EQ(EscapeRegex("plain_name"), "plain_name");
}

}  // namespace
}  // namespace sparq
