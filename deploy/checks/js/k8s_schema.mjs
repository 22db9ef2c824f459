// Validates rendered Kubernetes objects against the Kubernetes OpenAPI
// schemas shipped in the kubernetes-models package (offline: types, formats,
// enums and required fields; unknown fields are caught by k8s_check.py).
//
//   node k8s_schema.mjs objects.json   # a JSON array of objects
import { readFileSync } from "node:fs";

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node k8s_schema.mjs OBJECTS.json...");
  process.exit(2);
}

// apiVersion -> module folder of kubernetes-models ("v1" is the core group).
function modulePath(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/")
    ? apiVersion.split("/")
    : ["", apiVersion];
  return group ? `kubernetes-models/${group}/${version}/${kind}` : `kubernetes-models/${version}/${kind}`;
}

let failures = 0;
let checked = 0;
for (const file of files) {
  const objects = JSON.parse(readFileSync(file, "utf8"));
  for (const obj of objects) {
    const where = `${file}: ${obj.kind}/${obj.metadata?.name}`;
    let Model;
    try {
      Model = (await import(modulePath(obj.apiVersion, obj.kind)))[obj.kind];
    } catch (err) {
      console.error(`FAIL ${where}: no schema for ${obj.apiVersion} ${obj.kind} (${err.code ?? err.message})`);
      failures++;
      continue;
    }
    try {
      new Model(obj).validate();
      checked++;
    } catch (err) {
      console.error(`FAIL ${where}: ${err.message}`);
      failures++;
    }
  }
}
console.log(`k8s_schema: ${checked} objects valid, ${failures} invalid`);
process.exit(failures === 0 && checked > 0 ? 0 : 1);
