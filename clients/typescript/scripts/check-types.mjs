// Fails when src/openapi.ts is not what openapi-typescript generates from
// the repository's openapi.yaml today (run `npm run generate` and commit).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = mkdtempSync(join(tmpdir(), "turnd-types-"));
try {
  const fresh = join(dir, "openapi.ts");
  execFileSync(process.execPath, ["node_modules/openapi-typescript/bin/cli.js", "../../openapi.yaml", "-o", fresh], { stdio: ["ignore", "ignore", "inherit"] });
  if (readFileSync(fresh, "utf8") !== readFileSync("src/openapi.ts", "utf8")) {
    console.error("src/openapi.ts is stale: openapi.yaml changed. Run `npm run generate` in clients/typescript and commit the result.");
    process.exit(1);
  }
  console.log("src/openapi.ts matches openapi.yaml");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
