#!/usr/bin/env bash
# docs/cli.md against the binaries' own --help: for every subcommand of
# `testbed` (and the two daemons), each flag --help lists is in that section
# of the page, and each flag the section names is one --help lists. The flags
# are declared once, in code (experiments/cli/setting_flags.h and each
# subcommand's Add function); this keeps the page from drifting from them.
#
# Usage: cli_docs_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
page=$2/docs/cli.md
failures=0

# The long flags in text: --word or --two-words, without the ones every
# command has (--help) and CLI11's own --version.
flags_in() { { grep -oE -- '--[a-z][a-z0-9-]*[a-z0-9]' || true; } | { grep -vxE -- '--(help|version)' || true; } | sort -u; }

# The prose and tables of docs/cli.md from the heading line $1 to the
# next `## `: examples in fenced blocks may show other commands' flags, and
# link targets (#the-emulated-cluster---network-netns) are not flags.
section() {
  awk -v heading="$1" '
    index($0, heading) == 1 { inside = 1; next }
    inside && /^## / { exit }
    inside && /^```/ { fenced = !fenced; next }
    inside && !fenced { print }' "$page" | sed -E 's/\]\([^)]*\)/]/g'
}

# check HEADING HELP_FLAGS: the section under HEADING names exactly HELP_FLAGS.
check() {
  local title=$1 help=$2 documented missing extra
  if ! grep -qxF "$title" "$page"; then
    echo "docs/cli.md has no section '$title'" >&2
    failures=$((failures + 1))
    return
  fi
  documented=$(section "$title" | flags_in)
  missing=$(comm -23 <(echo "$help") <(echo "$documented") | tr '\n' ' ')
  extra=$(comm -13 <(echo "$help") <(echo "$documented") | tr '\n' ' ')
  if [[ -n ${missing// /} ]]; then
    echo "$title: --help lists flags docs/cli.md does not: $missing" >&2
    failures=$((failures + 1))
  fi
  if [[ -n ${extra// /} ]]; then
    echo "$title: docs/cli.md names flags --help does not list: $extra" >&2
    failures=$((failures + 1))
  fi
}

testbed=$build/experiments/testbed
for sub in $("$testbed" --help | awk '/^Subcommands:/ { on = 1; next } on && NF { print $1 }'); do
  check "## \`testbed $sub\`" "$("$testbed" "$sub" --help | flags_in)"
done
# One section for both daemons: it names the flags of either.
check "## The daemons: \`testbed-server\` and \`testbed-worker\`" \
  "$({ "$build/server/testbed-server" --help; "$build/worker/testbed-worker" --help; } | flags_in)"
if ((failures > 0)); then
  echo "$failures section(s) of docs/cli.md disagree with --help" >&2
  exit 1
fi
echo "docs/cli.md names every flag of every subcommand's --help, and no other"
