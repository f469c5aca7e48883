//! Configuration from wrangler vars, for both Workers: one table of variables per Worker
//! ([`Var`] rows) that parsing, `/v1/health` and the documentation's tables all follow.
//!
//! Every variable has a safe default. An invalid value never crashes a Worker: it is
//! replaced by the default and reported as a [`ConfigIssue`] naming the variable. Parsing
//! is pure (a lookup function in, a configuration out), so it is tested natively, and it
//! runs once per isolate.

use serde_json::{Map, Value};

/// One invalid variable: which, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// The variable name.
    pub var: &'static str,
    /// What was wrong and which default replaced it.
    pub message: String,
}

/// Who may see a variable's value in `/v1/health`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// Anyone.
    Public,
    /// Only a caller with the admin token (origins and routing details).
    Admin,
    /// Nobody: only whether it is set.
    Secret,
}

/// One configuration variable of a configuration `C`: its name, how it is parsed, its
/// default and what it means.
pub struct Var<C> {
    /// The wrangler var name.
    pub name: &'static str,
    /// The default, as the documentation shows it.
    pub default: &'static str,
    /// What it does, as the documentation shows it.
    pub description: &'static str,
    /// Who may see its value.
    pub visibility: Visibility,
    /// Applies a set value; `Err` says what a valid value looks like (the default stays).
    pub parse: fn(&str, &mut C) -> Result<(), String>,
    /// The value in force, for `/v1/health`.
    pub value: fn(&C) -> Value,
}

impl<C> std::fmt::Debug for Var<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Var").field("name", &self.name).finish()
    }
}

/// One row of a table of [`Var`]s: name, documented default, visibility, description, then
/// how a set value is applied and how the value in force is shown. A macro so that a row
/// reads as a table row, not as a struct literal.
#[macro_export]
macro_rules! var {
    ($name:literal, $default:literal, $vis:ident, $description:expr,
     parse: $parse:expr, value: $value:expr $(,)?) => {
        $crate::vars::Var {
            name: $name,
            default: $default,
            description: $description,
            visibility: $crate::vars::Visibility::$vis,
            parse: $parse,
            value: $value,
        }
    };
}

/// The longest part of an invalid value quoted back in its error (a `RULES` table can be
/// kilobytes long).
const QUOTE_MAX: usize = 80;

/// Applies every set variable of `vars` (a lookup of `None` or blank: unset) to `cfg`, in
/// table order, and answers the invalid ones, each replaced by its default.
pub fn apply<C>(
    vars: &[Var<C>],
    cfg: &mut C,
    lookup: impl Fn(&str) -> Option<String>,
) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    for var in vars {
        let Some(raw) = lookup(var.name) else {
            continue;
        };
        let value = raw.trim();
        if value.is_empty() {
            continue;
        }
        if let Err(why) = (var.parse)(value, cfg) {
            let mut quoted = format!("{value:?}");
            if quoted.len() > QUOTE_MAX {
                let cut = (0..=QUOTE_MAX)
                    .rev()
                    .find(|&i| quoted.is_char_boundary(i))
                    .unwrap_or(0);
                quoted.truncate(cut);
                quoted.push('…');
            }
            // A secret is never quoted back, not even when invalid.
            if var.visibility == Visibility::Secret {
                quoted = "a value".into();
            }
            issues.push(ConfigIssue {
                var: var.name,
                message: format!("{why}, got {quoted}; using {}", var.default),
            });
        }
    }
    issues
}

/// Every variable's value in force, in table order, with what `admin` may see: public ones
/// always, routing details only for the admin, secrets only as set or not.
pub fn values<C>(vars: &[Var<C>], cfg: &C, admin: bool) -> Map<String, Value> {
    vars.iter()
        .filter(|v| admin || v.visibility != Visibility::Admin)
        .map(|v| (v.name.to_string(), (v.value)(cfg)))
        .collect()
}

/// The Markdown table of `vars`, as the documentation shows it.
pub fn table<C>(vars: &[Var<C>]) -> String {
    let mut out = String::from("| var | default | meaning |\n|---|---|---|\n");
    for v in vars {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            v.name, v.default, v.description
        ));
    }
    out
}

/// An integer in `lo..=hi`.
///
/// # Errors
/// `must be an integer lo..=hi`.
pub fn int(s: &str, lo: u32, hi: u32) -> Result<u32, String> {
    s.parse::<u32>()
        .ok()
        .filter(|v| (lo..=hi).contains(v))
        .ok_or_else(|| format!("must be an integer {lo}..={hi}"))
}

/// `true/false`, `1/0`, `yes/no`, `on/off` (any case).
///
/// # Errors
/// `must be true or false`.
pub fn flag(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err("must be true or false".into()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Default)]
    struct Cfg {
        n: u32,
        on: bool,
        token: Option<String>,
    }

    #[rustfmt::skip]
    const TABLE: &[Var<Cfg>] = &[
        crate::var! { "N", "3", Public, "a number",
            parse: |s, c| int(s, 1, 9).map(|v| c.n = v), value: |c| json!(c.n) },
        crate::var! { "ON", "false", Admin, "a flag",
            parse: |s, c| flag(s).map(|v| c.on = v), value: |c| json!(c.on) },
        crate::var! { "TOKEN", "—", Secret, "a secret",
            parse: |s, c| {
                if s.len() < 4 {
                    return Err("must be at least 4 bytes".into());
                }
                c.token = Some(s.into());
                Ok(())
            },
            value: |c| json!(c.token.is_some()) },
    ];

    #[test]
    fn a_table_parses_reports_and_shows_what_it_may() {
        let vals = [("N", "12"), ("ON", " yes "), ("TOKEN", "abc")];
        let lookup = |k: &str| {
            vals.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        let mut c = Cfg::default();
        let issues = apply(TABLE, &mut c, lookup);
        assert_eq!((c.n, c.on, c.token.is_some()), (0, true, false));
        assert_eq!(
            issues,
            vec![
                ConfigIssue {
                    var: "N",
                    message: "must be an integer 1..=9, got \"12\"; using 3".into()
                },
                ConfigIssue {
                    var: "TOKEN",
                    message: "must be at least 4 bytes, got a value; using —".into()
                },
            ]
        );
        assert_eq!(values(TABLE, &c, false).len(), 2);
        assert_eq!(values(TABLE, &c, true)["ON"], true);
        assert_eq!(
            table(TABLE),
            "| var | default | meaning |\n|---|---|---|\n| `N` | 3 | a number |\n| `ON` | false | a flag |\n| `TOKEN` | — | a secret |\n"
        );
        let long = "x".repeat(500);
        let issues = apply(TABLE, &mut c, |k| (k == "N").then(|| long.clone()));
        assert!(issues[0].message.len() < 150, "{}", issues[0].message);
    }
}
