#!/usr/bin/env bash
# Includes run downward only (README.md, "Layout"; docs/design.md, "Layering"): a file that includes a room
# above its own fails this test, naming the file, the line and the rule.
#   common/     nothing of the project's but the generated proto messages
#   allreduce/  common/ only: the core has no gRPC and no protobuf
#   proto/      common/, allreduce/
#   server/, worker/   common/, allreduce/, proto/ - never each other
#   experiments/       anything but server/ (it starts the server as a daemon)
# usage: tests/layering_test.sh SOURCE_DIR
set -euo pipefail
root=${1:?usage: layering_test.sh SOURCE_DIR}
cd "$root"
failed=0
# room, then the include prefixes it must not use
check() {
  local room=$1; shift
  local pattern
  pattern=$(printf '|%s' "$@"); pattern=${pattern:1}
  local hits
  hits=$(grep -rnE "^#include \"($pattern)/" "$room" --include='*.h' --include='*.cc' \
           --include='*.cu' || true)
  if [[ -n $hits ]]; then
    echo "FAIL: $room/ includes what it must not ($*):"
    echo "$hits"
    failed=1
  fi
}
check common allreduce server worker experiments tests
check allreduce proto server worker experiments tests
check proto server worker experiments tests
check server worker experiments tests
check worker server experiments tests
check experiments server tests
# common/'s one exception: the generated messages that configure an optimizer.
if grep -rnE '^#include "proto/' common | grep -vE '"proto/[a-z_]+\.pb\.h"'; then
  echo "FAIL: common/ includes proto/ beyond its generated messages"
  failed=1
fi
[[ $failed == 0 ]] && echo "layering: every include runs downward"
exit $failed
