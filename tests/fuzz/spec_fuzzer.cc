// The experiment spec as a user writes it: protobuf text format into an
// ExperimentSpec through the CLI's reader (ParseSpecText, with its hint for
// the old string spellings), then ApplyDefaults and ValidateSpec (what the CLI and the
// coordinator do with a spec file; its fabric { } too, proto/fabric_spec.h), and the same bytes as the CLI's --sizes
// list (ParseSizeList). Invariants: defaults applied twice change nothing; a
// parsed size list is non-empty, strictly ascending and never negative, and a
// range (MIN:MAX...) has sizes > 0 that end at MAX.
#include <cstddef>
#include <cstdint>
#include <string>

#include "experiments/cli/experiment_flags.h"
#include "experiments/cli/spec_file.h"
#include "proto/fabric_spec.h"
#include "proto/spec.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

void Spec(const std::string& text) {
  testbed::proto::ExperimentSpec spec;
  // The CLI's reader: errors, and the old-spelling line, never crash.
  if (!testbed::ParseSpecText(text, "fuzz", spec, "spec").ok()) return;
  testbed::ApplyDefaults(spec);
  const std::string once = spec.SerializeAsString();
  testbed::ApplyDefaults(spec);
  FUZZ_CHECK(spec.SerializeAsString() == once);
  (void)testbed::UsesParameterServer(spec);
  if (!testbed::ValidateSpec(spec).ok()) return;
  // A fabric the spec's check passed places every rank in a rack that holds
  // one, and prices every rank's link and every rack's uplink.
  const int workers = static_cast<int>(spec.workers());
  const testbed::Placement placement = testbed::PlacementOf(spec.fabric(), workers);
  FUZZ_CHECK(testbed::ValidateRackPlacement(placement, workers).ok());
  const testbed::LinkRates rates = testbed::LinkRatesOf(spec.fabric(), workers, 1e9);
  FUZZ_CHECK(static_cast<int>(rates.host_bps.size()) == workers);
  FUZZ_CHECK(rates.uplink_bps.empty() ||
             static_cast<int>(rates.uplink_bps.size()) == placement.Racks(workers));
}

void SizeList(const std::string& text) {
  const absl::StatusOr<std::vector<std::int64_t>> sizes = testbed::ParseSizeList(text);
  if (!sizes.ok()) return;
  FUZZ_CHECK(!sizes->empty());
  FUZZ_CHECK(sizes->front() >= 0);
  for (std::size_t i = 1; i < sizes->size(); ++i) FUZZ_CHECK((*sizes)[i - 1] < (*sizes)[i]);
  if (text.find(':') != std::string::npos) FUZZ_CHECK(sizes->front() > 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Spec(text);
  SizeList(text);
  return 0;
}
