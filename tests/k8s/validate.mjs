// Validates Kubernetes manifests against the Kubernetes API's own schemas,
// offline: the OpenAPI schemas that the kubernetes-models package carries
// (its version pins the API version checked), through its validate(). Reads a
// YAML stream (`kubectl kustomize docker/k8s`, or a manifest file) on stdin;
// prints one line per object and exits 1 naming every object that breaks the
// schema - a misspelt field, a string where a number belongs, a missing
// required field.
//
// usage: node tests/k8s/validate.mjs NAME < manifests.yaml
import { parseAllDocuments } from 'yaml';

const source = process.argv[2] ?? 'stdin';
const text = await new Promise((resolve) => {
  let data = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (chunk) => { data += chunk; });
  process.stdin.on('end', () => resolve(data));
});

// kubernetes-models lays out its classes as GROUP/VERSION/KIND ("v1" alone
// for the core group).
async function modelOf(apiVersion, kind) {
  const path = `kubernetes-models/${apiVersion}/${kind}`;
  try {
    return (await import(path))[kind];
  } catch {
    return undefined;
  }
}

let failures = 0;
let objects = 0;
for (const document of parseAllDocuments(text)) {
  if (document.errors.length > 0) {
    console.log(`${source}: not YAML: ${document.errors[0].message}`);
    failures++;
    continue;
  }
  const object = document.toJS();
  if (object === null) continue;
  objects++;
  const name = `${object.kind ?? '?'} ${object.metadata?.name ?? '?'}`;
  const Model = await modelOf(object.apiVersion, object.kind);
  if (Model === undefined) {
    console.log(`${source}: ${name}: no schema for ${object.apiVersion} ${object.kind}`);
    failures++;
    continue;
  }
  try {
    new Model(object).validate();
    console.log(`${source}: ${name}: valid ${object.apiVersion} ${object.kind}`);
  } catch (error) {
    console.log(`${source}: ${name}: ${error.message}`);
    failures++;
  }
}
if (objects === 0) {
  console.log(`${source}: no objects`);
  failures++;
}
process.exit(failures === 0 ? 0 : 1);
