//! Logs: JSON lines through tracing (one object per event, the span fields flattened
//! in), filtered by RUST_LOG (default `info`). CloudWatch Logs Insights queries them by
//! field: table, shard, base_snapshot_id, new_snapshot_id, request_id.

use tracing_subscriber::EnvFilter;

/// Installs the JSON subscriber on stdout; a second call does nothing.
pub fn init_json() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .flatten_event(true)
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .with_ansi(false)
        .try_init();
}

/// The process's peak resident set size in bytes (Linux `VmHWM`), when known.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}
