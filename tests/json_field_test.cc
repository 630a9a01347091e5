// JsonField (tests/process_runner.h) reads every figure the
// integration tests judge out of the harness's JSON lines, so it must return
// the whole value of exactly the key asked for - never a prefix of a longer
// number, a line cut short, or another key's value.
#include <gtest/gtest.h>

#include <string>

#include "tests/process_runner.h"

namespace testbed::testing {
namespace {

const std::string kRow =
    R"({"record": "result", "algorithm": "ring", "workers": 4, "bytes": 1048576, )"
    R"("alpha_us": 20, "payload_bytes_total": 262144, "time_us_avg": 1.5e+03, )"
    R"("delta": -3, "transport": "ucx:tcp/lo.0", "wrong": 0})";

TEST(JsonFieldTest, ReturnsTheWholeValueOfTheKey) {
  EXPECT_EQ(JsonField(kRow, "record"), "result");
  EXPECT_EQ(JsonField(kRow, "workers"), "4");
  EXPECT_EQ(JsonField(kRow, "bytes"), "1048576");  // not payload_bytes_total's
  EXPECT_EQ(JsonField(kRow, "alpha_us"), "20");
  EXPECT_EQ(JsonField(kRow, "payload_bytes_total"), "262144");
  EXPECT_EQ(JsonField(kRow, "time_us_avg"), "1.5e+03");
  EXPECT_EQ(JsonField(kRow, "delta"), "-3");
  EXPECT_EQ(JsonField(kRow, "transport"), "ucx:tcp/lo.0");
  EXPECT_EQ(JsonField(kRow, "wrong"), "0");  // the last field, before "}"
}

TEST(JsonFieldTest, AKeyIsNotTheSuffixOrPrefixOfAnother) {
  EXPECT_EQ(JsonField(R"({"payload_bytes": 5, "bytes_total": 6})", "bytes"), "");
  EXPECT_EQ(JsonField(R"({"payload_bytes": 5, "bytes": 7})", "bytes"), "7");
  EXPECT_EQ(JsonField(kRow, "total"), "");
}

// A value ends at a delimiter: a line cut short after "wrong": 1 (of 10) or
// a number run into junk has no value, rather than a wrong one.
TEST(JsonFieldTest, AValueMustEndAtADelimiter) {
  EXPECT_EQ(JsonField(R"({"record": "result", "wrong": 1)", "wrong"), "");
  EXPECT_EQ(JsonField(R"({"record": "result", "wrong": 0x1, "a": 2})", "wrong"), "");
  EXPECT_EQ(JsonField(R"({"wrong": 12abc})", "wrong"), "");
  EXPECT_EQ(JsonField(R"({"list": [1, 2], "wrong": 3 })", "wrong"), "3");
  EXPECT_EQ(JsonField(R"({"wrong": "unterminated)", "wrong"), "");
}

TEST(JsonFieldTest, AnEscapedQuoteDoesNotEndAString) {
  EXPECT_EQ(JsonField(R"({"algorithm": "ring \"fast\"", "bytes": 42})", "algorithm"),
            R"(ring \"fast\")");
}

TEST(JsonFieldTest, AKeyIsTakenLiterallyNotAsAPattern) {
  EXPECT_EQ(JsonField(R"({"ab": 1, "a+b": 2})", "a+b"), "2");
  EXPECT_EQ(JsonField(R"({"axb": 1})", "a.b"), "");
}

TEST(JsonFieldTest, NoValueForNonScalarsOrMissingKeys) {
  EXPECT_EQ(JsonField(R"({"shard_payload_bytes": [1, 2]})", "shard_payload_bytes"), "");
  EXPECT_EQ(JsonField(kRow, "servers"), "");
}

}  // namespace
}  // namespace testbed::testing
