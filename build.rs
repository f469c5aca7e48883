//! Embeds the decision model into the Worker at build time.
//!
//! Validates `model/decision-model.json` (or the file named by `DECIDER_MODEL`) with
//! decider-core, the same code that serves it, and writes its compact form
//! (`decider_core::compact`) to `OUT_DIR/decision-model.bin`, which the Worker embeds: no
//! JSON parsing of the model at isolate start. An artifact whose action list, encoder
//! version or shapes differ from this build fails the build, not a request.
//! `DECIDER_ALLOW_INVALID_MODEL=1` embeds a refused artifact anyway (with a warning), as a
//! compact form carrying only the refusal: the Worker then serves from rules and /v1/health
//! says why. That switch exists to exercise the fallback, not for deployments.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    println!("cargo:rerun-if-env-changed=DECIDER_MODEL");
    println!("cargo:rerun-if-env-changed=DECIDER_ALLOW_INVALID_MODEL");
    let Some(manifest) = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from) else {
        eprintln!("error: CARGO_MANIFEST_DIR is not set");
        return ExitCode::FAILURE;
    };
    let Some(out_dir) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        eprintln!("error: OUT_DIR is not set");
        return ExitCode::FAILURE;
    };
    let path = std::env::var_os("DECIDER_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("model/decision-model.json"));
    println!("cargo:rerun-if-changed={}", path.display());

    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!(
                "error: cannot read the model artifact {}: {e}\n\
                 (train one with `decider train`, or point DECIDER_MODEL at an artifact)",
                path.display()
            );
            return ExitCode::FAILURE;
        }
    };
    let (bytes, refused) = decider_core::compact::compile_or_refusal(&text);
    if let Some(e) = refused {
        let allow = std::env::var("DECIDER_ALLOW_INVALID_MODEL").as_deref() == Ok("1");
        if !allow {
            eprintln!(
                "error: the model artifact {} is refused: {e}\n\
                 (DECIDER_ALLOW_INVALID_MODEL=1 embeds it anyway; the Worker then serves from rules)",
                path.display()
            );
            return ExitCode::FAILURE;
        }
        println!(
            "cargo:warning=embedding a refused model artifact ({e}); the Worker will serve from rules"
        );
    }
    if let Err(e) = std::fs::write(out_dir.join("decision-model.bin"), bytes) {
        eprintln!("error: cannot write the embedded artifact: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
