//! edge-decider Worker (placeholder until the Worker issue lands).
use worker::*;

#[event(fetch)]
async fn fetch(_req: Request, _env: Env, _ctx: Context) -> Result<Response> {
    Response::ok("edge-decider")
}
