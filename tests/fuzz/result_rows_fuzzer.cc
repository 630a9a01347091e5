// Results files as the fit, report and plot readers get them: ReadResultRows
// over the input as a stream of JSON lines. Invariants: every row it returns
// has an algorithm, workers >= 1 and bytes >= 0 (its stated contract), and a
// row written back out as a results line (ResultRecordJson) reads back as one
// row, the same one.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "experiments/results/result_row.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  const absl::StatusOr<std::vector<testbed::proto::ResultRow>> rows = testbed::ReadResultRows(in);
  if (!rows.ok()) return 0;
  for (const testbed::proto::ResultRow& row : *rows) {
    FUZZ_CHECK(!row.algorithm().empty() && row.workers() >= 1 && row.bytes() >= 0);
    std::istringstream line(testbed::ResultRecordJson(row) + "\n");
    const absl::StatusOr<std::vector<testbed::proto::ResultRow>> again =
        testbed::ReadResultRows(line);
    FUZZ_CHECK(again.ok() && again->size() == 1);
    FUZZ_CHECK((*again)[0].SerializeAsString() == row.SerializeAsString());
  }
  return 0;
}
