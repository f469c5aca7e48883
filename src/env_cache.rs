//! Values derived from a Worker's `env` object, kept for the isolate.
//!
//! workerd hands every request of an isolate the same `env` object, so an identity check
//! (`Object.is`, one call into JS) replaces deriving the value again on every request (reading
//! every var, looking a binding up). Another `env` object derives it anew.

use std::cell::RefCell;
use wasm_bindgen::JsValue;

/// One value derived from the last `env` object seen (for a `thread_local!`).
pub struct PerEnv<T>(RefCell<Option<(JsValue, T)>>);

impl<T: Clone> PerEnv<T> {
    /// Empty: the first [`PerEnv::get`] derives the value.
    pub const fn new() -> PerEnv<T> {
        PerEnv(RefCell::new(None))
    }

    /// The value for `env`: the kept one when `env` is the object it was derived from, else
    /// `derive()`, which is then kept.
    pub fn get(&self, env: &JsValue, derive: impl FnOnce() -> T) -> T {
        let kept = self
            .0
            .borrow()
            .as_ref()
            .filter(|(seen, _)| js_sys::Object::is(seen, env))
            .map(|(_, v)| v.clone());
        if let Some(v) = kept {
            return v;
        }
        let v = derive();
        *self.0.borrow_mut() = Some((env.clone(), v.clone()));
        v
    }
}

impl<T: Clone> Default for PerEnv<T> {
    fn default() -> PerEnv<T> {
        PerEnv::new()
    }
}
