// The lab's page - every file of experiments/lab/assets/ - compiled into the
// binary at build time (cmake/EmbedFiles.cmake writes lab_assets.cc), so the
// lab works offline and from any folder: no CDN, no files to install.
//
// Thread-safety: immutable after static initialization.
#pragma once

#include <string_view>
#include <vector>

namespace testbed {

struct LabAsset {
  std::string_view name;     // file name under assets/: "index.html", "lab.js"
  std::string_view content;  // its bytes
};

// Every asset, sorted by name.
const std::vector<LabAsset>& LabAssets();

}  // namespace testbed
