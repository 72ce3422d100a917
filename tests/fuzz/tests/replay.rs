//! The short fuzzing run of every CI run, on stable Rust: each target's seed corpus
//! (`corpus/<target>/`), the inputs of every bug fuzzing found (`regressions/<target>/`),
//! and seeded mutations of the seeds (`EQDV_FUZZ_MUTANTS` per target, 2,000 by
//! default). An input fails when its target panics, when one allocation it makes is
//! larger than its size justifies, or when it takes longer than a hang would.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use eqdv_fuzz::{Target, mutate};

/// One allocation this large is refused outright (the process aborts, naming it):
/// nothing eqdv decodes from a few kilobytes may ask for it.
const HARD_LIMIT: usize = 256 << 20;
/// The largest allocation an input may cause: a fixed allowance (buffers, batches)
/// plus a multiple of its size.
fn allowance(input_len: usize) -> usize {
    (32 << 20) + 64 * input_len
}
/// An input this slow is a hang (seeds take milliseconds in the dev profile).
const HANG: Duration = Duration::from_secs(20);

thread_local! {
    /// The largest allocation this thread made since the last reset.
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

struct Counting;

// SAFETY: every call is passed on to the system allocator unchanged; the wrapper only
// records sizes (and refuses sizes above HARD_LIMIT, which a GlobalAlloc may do by
// returning null).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !record(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, as received.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !record(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, which is the system's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !record(new_size) {
            return std::ptr::null_mut();
        }
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Records an allocation of `size` bytes; false when it is above the hard limit (said on
/// stderr without allocating: the process is about to abort).
fn record(size: usize) -> bool {
    let _ = LARGEST.try_with(|largest| largest.set(largest.get().max(size)));
    if size > HARD_LIMIT {
        let _ = std::io::stderr()
            .write_all(b"fuzz replay: an input asked for one allocation over 256 MiB\n");
        return false;
    }
    true
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// The files of `dir`, sorted (none when it does not exist).
fn inputs(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    files
        .into_iter()
        .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != "README.md"))
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.display().to_string(), bytes)
        })
        .collect()
}

/// Runs one input; the failure names it.
fn run_one(target: &Target, label: &str, data: &[u8]) {
    LARGEST.with(|l| l.set(0));
    let started = Instant::now();
    let outcome = std::panic::catch_unwind(|| (target.run)(data));
    let took = started.elapsed();
    let largest = LARGEST.with(Cell::get);
    if let Err(panic) = outcome {
        let why = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!(
            "{} panicked on {label} ({} bytes): {why}",
            target.name,
            data.len()
        );
    }
    assert!(
        largest <= allowance(data.len()),
        "{} made one allocation of {largest} bytes for {label} ({} bytes)",
        target.name,
        data.len()
    );
    assert!(took < HANG, "{} took {took:?} on {label}", target.name);
}

fn mutants_per_target() -> u64 {
    std::env::var("EQDV_FUZZ_MUTANTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

/// Replays `name`'s corpus and regressions, then its mutants; returns how many inputs.
fn replay(name: &str) -> u64 {
    let target = eqdv_fuzz::target(name).unwrap_or_else(|| panic!("no target {name}"));
    let seeds = inputs(&fuzz_dir().join("corpus").join(name));
    assert!(!seeds.is_empty(), "target {name} has no seed corpus");
    let regressions = inputs(&fuzz_dir().join("regressions").join(name));
    for (label, data) in seeds.iter().chain(&regressions) {
        run_one(target, label, data);
    }
    let mutants = mutants_per_target();
    for index in 0..mutants {
        let (label, seed) = &seeds[(index % seeds.len() as u64) as usize];
        let data = mutate::mutant(seed, index);
        run_one(target, &format!("mutant {index} of {label}"), &data);
    }
    seeds.len() as u64 + regressions.len() as u64 + mutants
}

/// One input of one target, to reproduce a failure: `EQDV_FUZZ_TARGET=manifest
/// EQDV_FUZZ_INPUT=FILE cargo test -p eqdv-fuzz --test replay -- --ignored reproduce`.
/// With `EQDV_FUZZ_SEED=FILE` and `EQDV_FUZZ_MUTANT=N` instead of the input, the
/// replay's mutant N of that seed (and `EQDV_FUZZ_WRITE=FILE` writes it out).
#[test]
#[ignore = "a tool: runs the input the environment names"]
fn reproduce() {
    let var = |name: &str| std::env::var(name).ok();
    let name = var("EQDV_FUZZ_TARGET").unwrap_or_else(|| panic!("set EQDV_FUZZ_TARGET"));
    let target = eqdv_fuzz::target(&name).unwrap_or_else(|| panic!("no target {name}"));
    let data = match (
        var("EQDV_FUZZ_INPUT"),
        var("EQDV_FUZZ_SEED"),
        var("EQDV_FUZZ_MUTANT"),
    ) {
        (Some(input), _, _) => std::fs::read(&input).unwrap_or_else(|e| panic!("{input}: {e}")),
        (None, Some(seed), Some(index)) => {
            let seed = std::fs::read(&seed).unwrap_or_else(|e| panic!("{seed}: {e}"));
            let index = index
                .parse()
                .unwrap_or_else(|e| panic!("EQDV_FUZZ_MUTANT: {e}"));
            mutate::mutant(&seed, index)
        }
        _ => panic!("set EQDV_FUZZ_INPUT, or EQDV_FUZZ_SEED and EQDV_FUZZ_MUTANT"),
    };
    if let Some(out) = var("EQDV_FUZZ_WRITE") {
        std::fs::write(&out, &data).unwrap_or_else(|e| panic!("{out}: {e}"));
    }
    run_one(target, "the input", &data);
}

macro_rules! replay_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                let runs = replay(stringify!($name));
                eprintln!("{}: {runs} inputs", stringify!($name));
            }
        )*

        /// Every target has its replay test here.
        #[test]
        fn every_target_is_replayed() {
            let tested = [$(stringify!($name)),*];
            for target in eqdv_fuzz::TARGETS {
                assert!(tested.contains(&target.name), "{} is not replayed", target.name);
            }
        }
    };
}

replay_tests!(
    manifest,
    manifest_encode,
    summary,
    manifest_list,
    puffin,
    dv,
    parquet,
    index_leaf,
    index_metadata,
    planner_event,
    shard,
    split_task,
    range_result,
    properties,
);
