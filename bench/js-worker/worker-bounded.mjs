// The plain-JavaScript Worker (worker.mjs) with one change: it reads the body as edge-decider
// does, with the same bounded read (src/glue.js `readBounded`, the same file), instead of
// `request.text()`, which has no bound. A control for the side-by-side benchmark: it
// separates what the bounded read costs from what Rust/wasm costs.
import { readBounded } from "./glue.js";
import { MAX_BODY, answer, check, err } from "./handler.mjs";

const decoder = new TextDecoder();

export default {
  async fetch(request) {
    const refused = check(request);
    if (refused) return refused;
    const bytes = await readBounded(request, MAX_BODY);
    if (bytes === null) return err(413, "payload_too_large", "body over 16 KiB");
    return answer(request, decoder.decode(bytes));
  },
};
