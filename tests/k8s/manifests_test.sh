#!/usr/bin/env bash
# The Kubernetes manifests (docker/k8s/) rendered as `kubectl apply -k` renders
# them (`kubectl kustomize`) and checked against the Kubernetes API's schemas
# offline (tests/k8s/validate.mjs); the Secret templates beside them too. A
# broken manifest is refused first, so the check cannot pass by checking
# nothing. Skips (77) without kubectl, node, or the validator's packages
# (.ci/install-deps installs them).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/tests/k8s
for tool in kubectl node; do
  command -v "$tool" >/dev/null || { echo "manifests_test: skipped: no $tool"; exit 77; }
done
[[ -d $here/node_modules/kubernetes-models ]] ||
  { echo "manifests_test: skipped: no $here/node_modules (.ci/install-deps)"; exit 77; }
validate() { node "$here/validate.mjs" "$@"; }

# A command item written as a plain YAML scalar holding ": " is a mapping, not
# a string: the defect the run Job had.
broken=$'apiVersion: batch/v1\nkind: Job\nmetadata: {name: broken}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: c\n          image: i\n          command:\n            - until (: </dev/tcp/x/1); do sleep 2; done\n'
if validate broken <<<"$broken"; then
  echo "manifests_test: the validator passed a Job whose command holds a mapping"
  exit 1
fi
kubectl kustomize "$root/docker/k8s" | validate docker/k8s
for template in secret.yaml tls-secret.yaml; do
  validate "docker/k8s/$template" <"$root/docker/k8s/$template"
done
echo "manifests_test: every manifest is valid against the Kubernetes API's schemas"
