//! Embeds the decision models into the Worker at build time.
//!
//! The champion, `model/decision-model.json` (or the file named by `DECIDER_MODEL`), and an
//! optional challenger, `model/challenger.json` (or `DECIDER_CHALLENGER`), are validated with
//! decider-core, the same code that serves them, and written to `OUT_DIR` in their compact
//! form (`decider_core::compact`), which the Worker embeds: no JSON parsing of a model at
//! isolate start. An artifact whose action list, encoder version or shapes differ from this
//! build fails the build, not a request. `DECIDER_ALLOW_INVALID_MODEL=1` embeds a refused
//! artifact anyway (with a warning) as a compact form carrying only the refusal: the Worker
//! then serves that model's traffic from rules and /v1/health says why. That switch exists
//! to exercise the fallback, not for deployments.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    for var in [
        "DECIDER_MODEL",
        "DECIDER_CHALLENGER",
        "DECIDER_ALLOW_INVALID_MODEL",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let (Some(manifest), Some(out_dir)) = (
        std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from),
        std::env::var_os("OUT_DIR").map(PathBuf::from),
    ) else {
        eprintln!("error: CARGO_MANIFEST_DIR and OUT_DIR must be set (run through cargo)");
        return ExitCode::FAILURE;
    };
    let champion = std::env::var_os("DECIDER_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("model/decision-model.json"));
    let challenger = std::env::var_os("DECIDER_CHALLENGER").map(PathBuf::from);
    let challenger_required = challenger.is_some();
    let challenger = challenger.unwrap_or_else(|| manifest.join("model/challenger.json"));
    let embedded = embed(&champion, true, &out_dir.join("decision-model.bin")).and_then(|()| {
        embed(
            &challenger,
            challenger_required,
            &out_dir.join("challenger.bin"),
        )
    });
    match embedded {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Validates the artifact at `path` and writes its compact form to `out`. An optional
/// artifact that does not exist is written as an empty file (no such model).
fn embed(path: &Path, required: bool, out: &Path) -> Result<(), String> {
    println!("cargo:rerun-if-changed={}", path.display());
    let bytes = match std::fs::read_to_string(path) {
        Err(_) if !required && !path.exists() => Vec::new(),
        Err(e) => {
            return Err(format!(
                "cannot read the model artifact {}: {e}\n\
                 (train one with `decider train`, or point DECIDER_MODEL at an artifact)",
                path.display()
            ))
        }
        Ok(text) => {
            let (bytes, refused) = decider_core::compact::compile_or_refusal(&text);
            if let Some(e) = refused {
                if std::env::var("DECIDER_ALLOW_INVALID_MODEL").as_deref() != Ok("1") {
                    return Err(format!(
                        "the model artifact {} is refused: {e}\n\
                         (DECIDER_ALLOW_INVALID_MODEL=1 embeds it anyway; the Worker then serves from rules)",
                        path.display()
                    ));
                }
                println!(
                    "cargo:warning=embedding a refused model artifact {} ({e}); the Worker will serve its traffic from rules",
                    path.display()
                );
            }
            bytes
        }
    };
    std::fs::write(out, &bytes).map_err(|e| format!("cannot write {}: {e}", out.display()))
}
