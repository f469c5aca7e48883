// End-to-end tests: the built Worker (build/index.js) in workerd via Miniflare's Node API.
// Files run one after another: each starts its own workerd, and CI has two cores.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    root: new URL("../..", import.meta.url).pathname,
    include: ["tests/e2e/**/*.test.mjs"],
    environment: "node",
    fileParallelism: false,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
