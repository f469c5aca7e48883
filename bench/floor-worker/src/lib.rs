//! The floor: a workers-rs Worker that does nothing but answer a constant decision-shaped
//! JSON with the same headers as edge-decider. Whatever edge-decider costs above this is
//! the cost of its decision (and its request parsing), not of workers-rs or the runtime.
use worker::*;

const BODY: &str = r#"{"action":"route_a","confidence":null,"source":"default","fallback_reason":null,"model_version":null,"encoder_version":1,"probabilities":null,"decision_us":0}"#;

#[event(fetch)]
async fn fetch(mut req: Request, _env: Env, _ctx: Context) -> Result<Response> {
    // Read the body as every real handler does: a Worker that leaves it unread gets its
    // keep-alive connection closed by workerd, which would make the floor slower, not faster.
    let _ = req.bytes().await?;
    let mut resp = Response::ok(BODY)?;
    let h = resp.headers_mut();
    h.set("content-type", "application/json")?;
    h.set("x-decision-action", "route_a")?;
    h.set("x-decision-source", "default")?;
    Ok(resp)
}
