//! The judges of the integration tests (the `eqdv-judges` crate, shared with the engine's
//! and the CLI's tests), under the name these test files have always used.
#![allow(unused_imports)]

pub use eqdv_judges::*;
