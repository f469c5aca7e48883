//! Chooses the model the `decide_bytes` target runs: the shipped artifact
//! (`model/decision-model.json`) when it exists, else an empty file, in which case the
//! target falls back to decider-core's tiny test artifact.

use std::path::Path;

fn main() {
    let shipped = Path::new("../model/decision-model.json");
    // A directory is scanned for changes, so adding the artifact later rebuilds the target.
    println!("cargo:rerun-if-changed=../model");
    let text = std::fs::read_to_string(shipped).unwrap_or_default();
    let out =
        Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("artifact.json");
    std::fs::write(out, text).expect("OUT_DIR is writable");
}
