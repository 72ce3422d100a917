//! Fuzz targets: every kind of input eqdv decodes that another program wrote, each as a
//! function of arbitrary bytes that panics when a property fails.
//!
//! The properties, for every target: no panic and no hang on any input; an input that
//! cannot be used is refused with an error that names the file (or, for a message, what
//! is wrong with it); what is accepted survives a round trip or agrees with a second
//! decoder where one exists. Memory bounded by the input is checked by the harnesses:
//! libFuzzer's `-malloc_limit_mb` (tests/fuzz/run) and the replay test's counting
//! allocator (tests/replay.rs).
//!
//! Two harnesses run the same functions: libFuzzer through cargo-fuzz
//! (`tests/fuzz/libfuzzer`, coverage-guided, for hours; nightly Rust), and the replay
//! test on stable Rust in every CI run (the seed corpus, the regression inputs of
//! every bug found, and a few thousand seeded mutations of each seed).

mod files;
mod messages;
pub mod mutate;
mod writes;

/// A fuzz target: its name (the corpus directory and the libFuzzer binary) and its
/// function.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
}

/// Every target, in the order the run script and the report list them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "manifest",
        run: files::manifest,
    },
    Target {
        name: "manifest_list",
        run: files::manifest_list,
    },
    Target {
        name: "puffin",
        run: files::puffin,
    },
    Target {
        name: "dv",
        run: files::dv,
    },
    Target {
        name: "parquet",
        run: files::parquet,
    },
    Target {
        name: "index_leaf",
        run: files::index_leaf,
    },
    Target {
        name: "manifest_encode",
        run: writes::manifest_encode,
    },
    Target {
        name: "summary",
        run: writes::summary,
    },
    Target {
        name: "index_metadata",
        run: messages::index_metadata,
    },
    Target {
        name: "planner_event",
        run: messages::planner_event,
    },
    Target {
        name: "shard",
        run: messages::shard,
    },
    Target {
        name: "split_task",
        run: messages::split_task,
    },
    Target {
        name: "range_result",
        run: messages::range_result,
    },
    Target {
        name: "properties",
        run: messages::properties,
    },
];

/// The target named `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// One runtime per thread for the async readers, reused across inputs (building one
/// per input would dominate a fuzzer's time). Single-threaded, on the calling thread:
/// the inputs live in memory, and the replay test counts each thread's allocations.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    thread_local! {
        static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap_or_else(|e| panic!("cannot build the fuzz runtime: {e}"));
    }
    RUNTIME.with(|runtime| runtime.block_on(future))
}

/// Fails the input when `error` does not name `what` (a file's location, a field).
fn assert_names(error: &dyn std::fmt::Display, what: &str) {
    let message = error.to_string();
    assert!(
        message.contains(what),
        "the error does not name {what}: {message}"
    );
}

/// Runs target `name` on `data` (what each libFuzzer binary calls).
pub fn run(name: &str, data: &[u8]) {
    match target(name) {
        Some(target) => (target.run)(data),
        None => panic!("no fuzz target {name}"),
    }
}
