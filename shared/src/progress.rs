//! Progress of a long conversion, for a caller that shows it (the CLI's progress bar):
//! the resolve's scan and the key index's build say which data files they are about to
//! read and report each one read. Nothing is reported unless a caller listens, and
//! nothing the conversion decides depends on it.

use std::fmt;
use std::sync::Arc;

/// Which reading a report is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressStep {
    /// The resolve reading candidates' key columns (once per key pass).
    Scan,
    /// The key index reading the files it does not hold yet.
    IndexBuild,
}

/// One report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressEvent {
    /// `files` data files of `bytes` in all are about to be read.
    Reading {
        step: ProgressStep,
        files: u64,
        bytes: u64,
    },
    /// One of them, of `bytes`, was read.
    Read { step: ProgressStep, bytes: u64 },
}

/// Where reports go: nowhere by default. Clones share the listener.
#[derive(Clone, Default)]
pub struct Progress(Option<Arc<dyn Fn(ProgressEvent) + Send + Sync>>);

impl Progress {
    /// Reports to `listener` (called from the conversion's tasks: keep it quick).
    pub fn new(listener: impl Fn(ProgressEvent) + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(listener)))
    }

    pub fn report(&self, event: ProgressEvent) {
        if let Some(listener) = &self.0 {
            listener(event);
        }
    }

    /// Reports that `files` (sizes in bytes) are about to be read.
    pub fn reading(&self, step: ProgressStep, sizes: impl Iterator<Item = u64>) {
        if self.0.is_some() {
            let (files, bytes) = sizes.fold((0, 0), |(n, sum), size| (n + 1, sum + size));
            self.report(ProgressEvent::Reading { step, files, bytes });
        }
    }
}

impl fmt::Debug for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Progress(listening)"
        } else {
            "Progress(off)"
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn a_listener_hears_what_is_reported_and_the_default_hears_nothing() {
        let heard = Arc::new(Mutex::new(Vec::new()));
        let progress = Progress::new({
            let heard = heard.clone();
            move |event| heard.lock().unwrap().push(event)
        });
        progress
            .clone()
            .reading(ProgressStep::Scan, [10, 32].into_iter());
        progress.report(ProgressEvent::Read {
            step: ProgressStep::Scan,
            bytes: 10,
        });
        assert_eq!(
            *heard.lock().unwrap(),
            vec![
                ProgressEvent::Reading {
                    step: ProgressStep::Scan,
                    files: 2,
                    bytes: 42
                },
                ProgressEvent::Read {
                    step: ProgressStep::Scan,
                    bytes: 10
                },
            ]
        );
        Progress::default().reading(ProgressStep::Scan, [1].into_iter());
        assert_eq!(format!("{:?}", Progress::default()), "Progress(off)");
    }
}
