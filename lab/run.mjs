// `make lab`: scenarios A to E, then docs/reports/LAB.md. Exits 1 when a must-show fails.
// LAB_ONLY=a, b, c, d or e runs one scenario (docs/reports/LAB.md keeps the others' last results).
import { render } from "./render.mjs";
import { scenarioA } from "./scenario-a.mjs";
import { scenarioB } from "./scenario-b.mjs";
import { scenarioC } from "./scenario-c.mjs";
import { scenarioD } from "./scenario-d.mjs";
import { scenarioE } from "./scenario-e.mjs";

const only = process.env.LAB_ONLY ?? "";
const results = [];
if (only === "" || only === "a") results.push(await scenarioA());
if (only === "" || only === "b") results.push(await scenarioB());
if (only === "" || only === "c") results.push(await scenarioC());
if (only === "" || only === "d") results.push(await scenarioD());
if (only === "" || only === "e") results.push(await scenarioE());
render();
let failed = 0;
for (const r of results) {
  for (const m of r.must_show) {
    console.log(`${m.pass ? "PASS" : "FAIL"} [${r.scenario}] ${m.name}: ${m.detail}`);
    if (!m.pass) failed++;
  }
}
console.log(failed ? `make lab: ${failed} must-show(s) failed (see docs/reports/LAB.md)` : "make lab: every must-show passed (docs/reports/LAB.md)");
process.exit(failed ? 1 : 0);
