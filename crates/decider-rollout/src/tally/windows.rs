//! Per-window totals of the flush batches a control plane received.

use super::Tally;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Default window width: one minute.
pub const DEFAULT_WINDOW_MS: i64 = 60_000;

/// Default number of windows kept: two hours of one-minute windows.
pub const DEFAULT_MAX_WINDOWS: usize = 120;

/// Windows folded into one total, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Folded {
    /// Start of the oldest window folded, ms since the epoch.
    pub from_ms: i64,
    /// End of the newest window folded.
    pub to_ms: i64,
    /// Their total.
    pub tally: Tally,
}

/// Per-window totals, keyed by window start (ms since the epoch, a multiple of the width).
///
/// A batch is counted in the window of the time the store received it, so a window is
/// complete once its end has passed. At most `max_windows` windows are kept; adding one
/// more folds the oldest into [`Windows::folded`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "WindowsRepr", into = "WindowsRepr")]
pub struct Windows {
    width_ms: i64,
    max_windows: usize,
    windows: BTreeMap<i64, Tally>,
    folded: Option<Folded>,
}

#[derive(Serialize, Deserialize)]
struct WindowsRepr {
    width_ms: i64,
    max_windows: usize,
    windows: BTreeMap<i64, Tally>,
    #[serde(default)]
    folded: Option<Folded>,
}

impl TryFrom<WindowsRepr> for Windows {
    type Error = String;
    fn try_from(r: WindowsRepr) -> Result<Windows, String> {
        if r.width_ms < 1 {
            return Err(format!("width_ms must be positive, got {}", r.width_ms));
        }
        if r.max_windows < 1 {
            return Err("max_windows must be at least 1".into());
        }
        if let Some(k) = r.windows.keys().find(|k| k.rem_euclid(r.width_ms) != 0) {
            return Err(format!(
                "window start {k} is not a multiple of width_ms {}",
                r.width_ms
            ));
        }
        let mut w = Windows {
            width_ms: r.width_ms,
            max_windows: r.max_windows,
            windows: r.windows,
            folded: r.folded,
        };
        w.fold_excess();
        Ok(w)
    }
}

impl From<Windows> for WindowsRepr {
    fn from(w: Windows) -> WindowsRepr {
        WindowsRepr {
            width_ms: w.width_ms,
            max_windows: w.max_windows,
            windows: w.windows,
            folded: w.folded,
        }
    }
}

impl Default for Windows {
    fn default() -> Windows {
        Windows::new(DEFAULT_WINDOW_MS, DEFAULT_MAX_WINDOWS)
    }
}

impl Windows {
    /// An empty store of windows `width_ms` wide (at least 1), keeping at most
    /// `max_windows` (at least 1).
    pub fn new(width_ms: i64, max_windows: usize) -> Windows {
        Windows {
            width_ms: width_ms.max(1),
            max_windows: max_windows.max(1),
            windows: BTreeMap::new(),
            folded: None,
        }
    }

    /// The window-reset rule: the `kept` windows when they are `width_ms` wide, else empty
    /// ones of that width (a changed `ROLLOUT_WINDOW_S` starts counting afresh rather than
    /// mixing widths).
    pub fn for_width(kept: Option<Windows>, width_ms: i64, max_windows: usize) -> Windows {
        kept.filter(|w| w.width_ms == width_ms)
            .unwrap_or_else(|| Windows::new(width_ms, max_windows))
    }

    /// The store that windows kept one per storage key make (`windows`: start → totals,
    /// `folded`: the folded total), with the windows beyond `max_windows`, and any for a time
    /// already folded, folded in; and the starts of the windows folded, whose keys can go.
    pub fn from_parts(
        width_ms: i64,
        max_windows: usize,
        windows: BTreeMap<i64, Tally>,
        folded: Option<Folded>,
    ) -> (Windows, Vec<i64>) {
        let mut w = Windows {
            folded,
            ..Windows::new(width_ms, max_windows)
        };
        let mut gone = Vec::new();
        for (start, t) in windows {
            match w.folded.as_mut().filter(|f| start < f.to_ms) {
                Some(f) => {
                    f.tally.merge(&t);
                    gone.push(start);
                }
                None => {
                    w.windows.insert(start, t);
                }
            }
        }
        let before: Vec<i64> = w.windows.keys().copied().collect();
        w.fold_excess();
        gone.extend(before.into_iter().filter(|s| !w.windows.contains_key(s)));
        (w, gone)
    }

    /// The window width, ms.
    pub fn width_ms(&self) -> i64 {
        self.width_ms
    }

    /// The start of the window holding `at_ms`.
    pub fn start_of(&self, at_ms: i64) -> i64 {
        at_ms.div_euclid(self.width_ms) * self.width_ms
    }

    /// Counts a batch received at `at_ms`. A batch for a time already folded (a clock that
    /// went back) is counted in the folded total.
    pub fn add(&mut self, batch: &Tally, at_ms: i64) {
        let start = self.start_of(at_ms);
        if let Some(f) = self.folded.as_mut().filter(|f| start < f.to_ms) {
            f.tally.merge(batch);
            return;
        }
        self.windows.entry(start).or_default().merge(batch);
        self.fold_excess();
    }

    fn fold_excess(&mut self) {
        while self.windows.len() > self.max_windows {
            let Some((start, tally)) = self.windows.pop_first() else {
                break;
            };
            let end = start + self.width_ms;
            match self.folded.as_mut() {
                Some(f) => {
                    f.tally.merge(&tally);
                    f.from_ms = f.from_ms.min(start);
                    f.to_ms = f.to_ms.max(end);
                }
                None => {
                    self.folded = Some(Folded {
                        from_ms: start,
                        to_ms: end,
                        tally,
                    })
                }
            }
        }
    }

    /// The windows kept, oldest first: (start, totals).
    pub fn windows(&self) -> impl Iterator<Item = (i64, &Tally)> {
        self.windows.iter().map(|(k, t)| (*k, t))
    }

    /// The windows folded for lack of room, if any.
    pub fn folded(&self) -> Option<&Folded> {
        self.folded.as_ref()
    }

    /// The complete windows (ended by `now_ms`), oldest first.
    pub fn complete(&self, now_ms: i64) -> impl Iterator<Item = (i64, &Tally)> {
        let width = self.width_ms;
        self.windows().filter(move |(s, _)| s + width <= now_ms)
    }

    /// Everything counted, folded windows included.
    pub fn total(&self) -> Tally {
        let mut t = self
            .folded
            .as_ref()
            .map(|f| f.tally.clone())
            .unwrap_or_default();
        for w in self.windows.values() {
            t.merge(w);
        }
        t
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::tests::sample;
    use super::*;

    #[test]
    fn windows_keep_the_newest_and_fold_the_rest() {
        let mut w = Windows::new(60_000, 3);
        let t0 = 1_796_205_600_000;
        for i in 0..5 {
            w.add(&sample(), t0 + i * 60_000 + 59_999);
            w.add(&sample(), t0 + i * 60_000);
        }
        let starts: Vec<i64> = w.windows().map(|(s, _)| s).collect();
        assert_eq!(starts, vec![t0 + 120_000, t0 + 180_000, t0 + 240_000]);
        let f = w.folded().unwrap();
        assert_eq!((f.from_ms, f.to_ms), (t0, t0 + 120_000));
        assert_eq!(f.tally.total().decisions, 2 * 2 * 3);
        assert_eq!(w.total().total().decisions, 5 * 2 * 3);
        // A batch for a folded time joins the folded total.
        w.add(&sample(), t0 + 10);
        assert_eq!(w.folded().unwrap().tally.total().decisions, 2 * 2 * 3 + 3);
        assert_eq!(w.complete(t0 + 240_000).count(), 2);
        assert_eq!(w.complete(t0 + 300_000).count(), 3);
        let back: Windows = serde_json::from_str(&serde_json::to_string(&w).unwrap()).unwrap();
        assert_eq!(back, w);
        assert_eq!(Windows::for_width(Some(back.clone()), 60_000, 3), back);
        let fresh = Windows::for_width(Some(back), 1_000, 3);
        assert_eq!((fresh.width_ms(), fresh.windows().count()), (1_000, 0));
        // Kept one per key: the same store, the excess folded and named.
        let parts: BTreeMap<i64, Tally> = (0..5).map(|i| (t0 + i * 60_000, sample())).collect();
        let (from_keys, gone) = Windows::from_parts(60_000, 3, parts, None);
        assert_eq!(gone, vec![t0, t0 + 60_000]);
        assert_eq!(from_keys.windows().count(), 3);
        assert_eq!(from_keys.folded().unwrap().tally.total().decisions, 2 * 3);
        let late: BTreeMap<i64, Tally> = [(t0, sample()), (t0 + 240_000, sample())].into();
        let (again, gone) = Windows::from_parts(60_000, 3, late, from_keys.folded().cloned());
        assert_eq!(gone, vec![t0]);
        assert_eq!(again.folded().unwrap().tally.total().decisions, 3 * 3);
        let bad = r#"{"width_ms":0,"max_windows":3,"windows":{}}"#;
        assert!(serde_json::from_str::<Windows>(bad).is_err());
        let bad = r#"{"width_ms":60000,"max_windows":3,"windows":{"5":{"v":1,"rows":[]}}}"#;
        assert!(serde_json::from_str::<Windows>(bad).is_err());
    }
}
