//! The `decider` commands, one module each: its flags (`Args`, with the `--help` text and
//! examples) and its `run`. A command reads its flags, calls the library and prints; the work
//! itself is the library's (the training pipeline in [`crate::train`], the report in
//! [`crate::report`], the load generator in [`crate::loadtest`], the estimators in
//! [`crate::ope`]). `main` parses the command line and calls one `run`.

pub mod decide;
pub mod eval;
pub mod loadtest;
pub mod ope;
pub mod report;
pub mod reward;
pub mod rollout;
pub mod simulate;
pub mod train;
