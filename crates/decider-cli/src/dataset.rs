//! The dataset format: JSONL, one `{"state": {…}, "action": "route_b"}` a line.
//!
//! Reading is strict — a dataset error names the file and line and what is wrong — because
//! a silently skipped or mis-parsed row is a training/serving skew nobody sees. `hour` is
//! required in datasets: training must not depend on the clock.

use decider_core::{Action, State, ACTIONS};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::Path;
use thiserror::Error;

/// A dataset error, with its location.
#[derive(Debug, Error)]
pub enum DatasetError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A line is invalid.
    #[error("{path}:{line}: {message}")]
    Line {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The file has no rows.
    #[error("{path}: no rows")]
    Empty {
        /// The file.
        path: String,
    },
}

/// A loaded dataset.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Rows in file order.
    pub rows: Vec<(State, Action)>,
    /// SHA-256 of the file's bytes, hex.
    pub sha256: String,
    /// Where the rows came from when not from a dataset file (`decider train --logs`): keys
    /// merged into the artifact's training record. None for a dataset file.
    pub provenance: Option<serde_json::Map<String, Value>>,
}

/// Parses one dataset line.
///
/// # Errors
/// A message naming the field that is wrong.
pub fn parse_line(text: &str) -> Result<(State, Action), String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("malformed json: {e}"))?;
    let obj = v.as_object().ok_or("a row must be a json object")?;
    if let Some(k) = obj.keys().find(|k| *k != "state" && *k != "action") {
        return Err(format!("unknown field {k}, expected state and action"));
    }
    let state = obj.get("state").ok_or("state is required")?;
    if state.get("hour").is_none() {
        return Err("state.hour is required in datasets".into());
    }
    let s = State::from_value(state, 0).map_err(|e| e.within("state").to_string())?;
    let a = obj.get("action").ok_or("action is required")?;
    let name = a
        .as_str()
        .ok_or_else(|| format!("action must be a string, got {a}"))?;
    let action = Action::parse_name(name)
        .ok_or_else(|| format!("action must be one of {ACTIONS:?}, got {name:?}"))?;
    Ok((s, action))
}

/// Reads a dataset file. Blank lines are skipped.
///
/// # Errors
/// [`DatasetError`] with file and line for the first bad row.
pub fn read(path: &Path) -> Result<Dataset, DatasetError> {
    let p = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| DatasetError::Io {
        path: p.clone(),
        source,
    })?;
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        DatasetError::Line {
            path: p.clone(),
            line,
            message: "invalid utf-8".into(),
        }
    })?;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        rows.push(parse_line(line).map_err(|message| DatasetError::Line {
            path: p.clone(),
            line: i + 1,
            message,
        })?);
    }
    if rows.is_empty() {
        return Err(DatasetError::Empty { path: p });
    }
    Ok(Dataset {
        rows,
        sha256: decider_core::hex::encode(&Sha256::digest(&bytes)),
        provenance: None,
    })
}

/// Writes rows as JSONL.
///
/// # Errors
/// I/O errors, with the path.
pub fn write(path: &Path, rows: &[(State, Action)]) -> Result<(), DatasetError> {
    let p = path.display().to_string();
    let io = |source| DatasetError::Io {
        path: p.clone(),
        source,
    };
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
    for (s, a) in rows {
        writeln!(
            out,
            "{}",
            json!({"state": s.to_value(), "action": a.name()})
        )
        .map_err(io)?;
    }
    out.flush().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_errors_name_the_field() {
        let ok = r#"{"state": {"request_type": 1, "region_id": 3, "current_load": 0.4, "recent_success_rate": 0.97, "queue_depth": 12, "hour": 14}, "action": "route_b"}"#;
        assert_eq!(parse_line(ok).unwrap().1, Action::RouteB);
        let e = parse_line(&ok.replace("\"region_id\": 3", "\"region_id\": 30")).unwrap_err();
        assert!(e.starts_with("state.region_id must be"), "{e}");
        let e = parse_line(&ok.replace("route_b", "route_x")).unwrap_err();
        assert!(e.contains("action must be one of"), "{e}");
        let e = parse_line(&ok.replace(", \"hour\": 14", "")).unwrap_err();
        assert!(e.contains("hour is required"), "{e}");
        assert!(parse_line("{").unwrap_err().contains("malformed json"));
    }

    #[test]
    fn read_reports_file_and_line() {
        let dir = std::env::temp_dir().join(format!("decider-ds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("bad.jsonl");
        let good = r#"{"state": {"request_type": 1, "region_id": 3, "current_load": 0.4, "recent_success_rate": 0.97, "queue_depth": 12, "hour": 14}, "action": "route_b"}"#;
        std::fs::write(&f, format!("{good}\n\n{}\n", good.replace("0.97", "NaN"))).unwrap();
        let e = read(&f).unwrap_err().to_string();
        assert!(e.contains("bad.jsonl:3: malformed json"), "{e}");
        std::fs::write(&f, format!("{good}\n")).unwrap();
        let d = read(&f).unwrap();
        assert_eq!(d.rows.len(), 1);
        assert_eq!(d.sha256.len(), 64);
    }
}
