// The plain-JavaScript Worker's request handling (worker.mjs; worker-bounded.mjs reads the
// body another way): same routes, headers and decision as edge-decider's POST /v1/decide,
// written by hand (see decide.mjs). The artifact and rule table are the same files
// edge-decider embeds, imported as text and parsed once per isolate.
import artifactText from "./artifact.json.txt";
import rulesText from "./rules.json.txt";
import { decideBody, loadModel, loadRules } from "./decide.mjs";

const model = loadModel(JSON.parse(artifactText));
const rules = loadRules(JSON.parse(rulesText));
export const MAX_BODY = 16 * 1024;

function json(status, body, headers = {}) {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
}

export const err = (status, code, message, headers) => json(status, { error: { code, message, field: null } }, headers);

// The checks before the body is read: a response for a request refused, else undefined.
export function check(request) {
  const url = new URL(request.url);
  if (url.pathname !== "/v1/decide") return err(404, "not_found", `no route ${url.pathname}`);
  if (request.method !== "POST") return err(405, "method_not_allowed", "use POST", { allow: "POST" });
  if (!(request.headers.get("content-type") ?? "").startsWith("application/json")) {
    return err(415, "unsupported_media_type", "content-type must be application/json");
  }
}

// The decision on a body read as text, its log line and its response.
export function answer(request, text) {
  const { status, body } = decideBody(model, rules, text, new Date().getUTCHours());
  if (status !== 200) return json(status, body);
  // One JSON log line per decision, as edge-decider writes (issue 3).
  console.log(
    JSON.stringify({
      ts: new Date().toISOString(),
      request_id: request.headers.get("cf-ray"),
      action: body.action,
      source: body.source,
      fallback_reason: body.fallback_reason,
      confidence: body.confidence,
      model_version: body.model_version,
      encoder_version: body.encoder_version,
      decision_us: body.decision_us,
    }),
  );
  return json(200, body, {
    "x-decision-action": body.action,
    "x-decision-source": body.source,
    "x-decision-model-version": body.model_version,
  });
}
