//! What a writer was given, kept for the test that reads it: a log subscriber's writer
//! in the tests that grep what a run printed (credentials must never be in it).

use std::io::Write;
use std::sync::{Arc, Mutex};

/// A writer whose clones all append to one buffer.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut out) = self.0.lock() {
            out.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// Everything written so far, as text.
    pub fn text(&self) -> String {
        self.0
            .lock()
            .map(|out| String::from_utf8_lossy(&out).into_owned())
            .unwrap_or_default()
    }
}
