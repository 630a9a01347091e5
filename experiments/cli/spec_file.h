// Spec files, read the one way every subcommand reads them: protobuf text
// format, and a mistake reported as FILE:LINE:COLUMN: what protobuf says.
//
// Thread-safety: a pure function.
#pragma once

#include <string>
#include <string_view>

#include <google/protobuf/message.h>

#include "absl/status/status.h"

namespace testbed {

// Parses the file at `path` into `spec`. A missing file is NOT_FOUND; a
// file that does not parse, INVALID_ARGUMENT with every error's place, or
// "PATH: not a valid `what`" where protobuf gives none; a field in the
// spelling from before the spec was typed, one line with the new spelling.
// The same for text already read; `path` names it in errors.
absl::Status ParseSpecText(const std::string& text, const std::string& path,
                           google::protobuf::Message& spec, std::string_view what);

absl::Status ReadSpecFileInto(const std::string& path, google::protobuf::Message& spec,
                              std::string_view what);

}  // namespace testbed
