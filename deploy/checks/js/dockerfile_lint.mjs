// Lints Dockerfiles with dockerfile-utils (the checker behind the VS Code
// Docker extension): unknown instructions, bad arguments, missing FROM, ...
// Any error or warning fails.
//
//   node dockerfile_lint.mjs Dockerfile...
import { readFileSync } from "node:fs";
import { validate } from "dockerfile-utils";

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node dockerfile_lint.mjs DOCKERFILE...");
  process.exit(2);
}
let problems = 0;
for (const file of files) {
  for (const d of validate(readFileSync(file, "utf8"))) {
    const level = d.severity === 1 ? "error" : d.severity === 2 ? "warning" : "note";
    console.error(`${file}:${d.range.start.line + 1}: ${level}: ${d.message}`);
    if (d.severity <= 2) problems++;
  }
}
console.log(`dockerfile_lint: ${files.length} file(s), ${problems} problem(s)`);
process.exit(problems === 0 ? 0 : 1);
