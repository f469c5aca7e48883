// The Worker's main module: the handler workers-rs builds (build/index.js), exported as a
// plain module handler. scripts/build-worker.sh copies this file to build/entry.mjs.
//
// worker-build exports a `WorkerEntrypoint` class behind a Proxy, which workerd constructs
// for every request, and the Proxy wraps the handler anew each time. Exported as an object,
// the same handler took 15–38 µs less workerd CPU per decision in three A/B runs
// (bench/cpu_probe.mjs at 400/s); its p99 did not move beyond this machine's noise.
//
// What the class's Proxy does besides, this keeps: after a wasm trap (a panic is compiled
// to one) workers-rs's shim marks the instance broken, and the next request goes through
// the class, whose construction re-instantiates the wasm module (workers-rs's panic
// recovery; tests/e2e/recovery.test.mjs).
import Entrypoint from "./index.js";

const state = globalThis.__worker_init_state;
const handler = Entrypoint.prototype.fetch;

export default {
  fetch(request, env, ctx) {
    // Without the shim's state (another worker-build) or after a trap: the class, as built.
    if (!state || state.criticalError) return new Entrypoint(ctx, env).fetch(request);
    return handler.call({ env, ctx }, request);
  },
};
