// The plain-JavaScript Worker of the side-by-side benchmark: same routes, headers and
// decision as edge-decider's POST /v1/decide, written by hand (handler.mjs, decide.mjs),
// reading the body with `request.text()`, as a team would.
import { MAX_BODY, answer, check, err } from "./handler.mjs";

export default {
  async fetch(request) {
    const refused = check(request);
    if (refused) return refused;
    const text = await request.text();
    if (text.length > MAX_BODY) return err(413, "payload_too_large", "body over 16 KiB");
    return answer(request, text);
  },
};
