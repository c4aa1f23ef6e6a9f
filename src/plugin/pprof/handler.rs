//! `/debug/pprof/`'s endpoints. `profile` samples every thread's stack 100 times a second (a
//! SIGPROF timer, through tikv's pprof-rs) for `seconds` (30 by default, as Go's; at most
//! [`MAX_SECONDS`]), and answers the symbolised profile in the pprof protobuf format, gzipped,
//! as Go's `net/http/pprof` does. One profile runs at a time (the timer is the process's): a
//! second request meanwhile is answered 500, as Go answers it. `cmdline` is the command line
//! (NUL-separated, as Go's). The other names Go serves are runtime profiles a Rust process
//! does not have: 404 with a body saying so.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::Path;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The sampling rate (Go's CPU profiler samples at 100 Hz).
pub const FREQUENCY: i32 = 100;
/// Go's default profile length.
pub const DEFAULT_SECONDS: u64 = 30;
/// The longest profile taken: a request holds the process's profiler (and a thread of its own)
/// this long at most.
pub const MAX_SECONDS: u64 = 120;

/// True while a profile is being taken.
static BUSY: AtomicBool = AtomicBool::new(false);

/// The names Go's index lists that are Go runtime profiles.
const GO_ONLY: &[&str] = &[
    "allocs",
    "block",
    "goroutine",
    "heap",
    "mutex",
    "threadcreate",
    "trace",
    "symbol",
];

const INDEX: &str = "/debug/pprof/ (cluster-dns)

profile   CPU profile: /debug/pprof/profile?seconds=N (default 30, at most 120), gzipped pprof
          protobuf; read it with `go tool pprof FILE` or `go tool pprof http://HOST:PORT/debug/pprof/profile`
cmdline   the command line, NUL-separated

Not available (Go runtime profiles; cluster-dns is not a Go program):
allocs block goroutine heap mutex threadcreate trace symbol
";

/// The `/debug/pprof/` router.
pub fn router() -> axum::Router {
    axum::Router::new()
        .route("/debug/pprof", get(|| async { INDEX }))
        .route("/debug/pprof/", get(|| async { INDEX }))
        .route("/debug/pprof/profile", get(profile))
        .route("/debug/pprof/cmdline", get(cmdline))
        .route("/debug/pprof/{name}", get(other))
}

fn text(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

async fn other(Path(name): Path<String>) -> Response {
    let why = if GO_ONLY.contains(&name.as_str()) {
        format!(
            "{name}: not available: it is a Go runtime profile and cluster-dns is not a Go program; /debug/pprof/profile gives a CPU profile\n"
        )
    } else {
        format!("{name}: unknown profile\n")
    };
    text(StatusCode::NOT_FOUND, why)
}

async fn cmdline() -> Response {
    let args: Vec<String> = std::env::args().collect();
    text(StatusCode::OK, args.join("\0"))
}

/// The `seconds` of `query` as Go reads it: absent, zero or negative is the default.
fn seconds(query: Option<&str>) -> Result<u64, String> {
    let Some(value) = query
        .unwrap_or_default()
        .split('&')
        .find_map(|kv| kv.strip_prefix("seconds="))
    else {
        return Ok(DEFAULT_SECONDS);
    };
    match value.parse::<i64>() {
        Ok(n) if n <= 0 => Ok(DEFAULT_SECONDS),
        Ok(n) if n.unsigned_abs() > MAX_SECONDS => Err(format!(
            "profile duration {n}s exceeds the longest profile, {MAX_SECONDS}s\n"
        )),
        Ok(n) => Ok(n.unsigned_abs()),
        Err(_) => Err("invalid value for \"seconds\"\n".to_owned()),
    }
}

/// Releases [`BUSY`] when the profile ends, however it ends.
struct Taking;

impl Drop for Taking {
    fn drop(&mut self) {
        BUSY.store(false, Ordering::Release);
    }
}

async fn profile(uri: Uri) -> Response {
    let secs = match seconds(uri.query()) {
        Ok(s) => s,
        Err(e) => return text(StatusCode::BAD_REQUEST, e),
    };
    if BUSY.swap(true, Ordering::AcqRel) {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Could not enable CPU profiling: a profile is already being taken\n".to_owned(),
        );
    }
    let taking = Taking;
    // A thread of its own, which sleeps through the profile (rather than a thread of the
    // runtime's blocking pool for that long). One at a time ([`BUSY`]).
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new().name("pprof".into()).spawn(move || {
        let _taking = taking;
        let _ = tx.send(take(Duration::from_secs(secs)));
    });
    if let Err(e) = spawned {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("Could not take the CPU profile: {e}\n"),
        );
    }
    match rx.await {
        Ok(Ok(body)) => (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, "application/octet-stream"),
                (header::CONTENT_DISPOSITION, "attachment; filename=\"profile\""),
            ],
            body,
        )
            .into_response(),
        Ok(Err(e)) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("Could not take the CPU profile: {e}\n"),
        ),
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("Could not take the CPU profile: {e}\n"),
        ),
    }
}

/// Drops the profiler's own frames from a sample (the unwinder, the SIGPROF handler and the
/// signal trampoline, which pprof-rs records above the interrupted code), so the leaf of each
/// stack is the function that was running, as in a Go profile.
fn strip_profiler_frames(frames: &mut ::pprof::Frames) {
    let profiler = |f: &Vec<::pprof::Symbol>| {
        f.iter().any(|s| {
            let name = s.name();
            name.contains("backtrace::")
                || name.contains("pprof::")
                || name.contains("perf_signal_handler")
                || name.contains("__restore_rt")
        })
    };
    let own = frames.frames.iter().take_while(|f| profiler(f)).count();
    frames.frames.drain(..own);
}

/// Samples the process for `length` (blocking the calling thread) and returns the gzipped
/// pprof protobuf.
fn take(length: Duration) -> Result<Vec<u8>, Box<dyn std::error::Error + Send + Sync>> {
    use ::pprof::protos::Message as _;
    // Frames in these libraries are skipped: unwinding through them from a signal handler can
    // deadlock (pprof-rs's advice), and the vdso's unwind tables are unreliable.
    let guard = ::pprof::ProfilerGuardBuilder::default()
        .frequency(FREQUENCY)
        .blocklist(&["libc", "libgcc", "pthread", "vdso"])
        .build()?;
    std::thread::sleep(length);
    let report = guard
        .report()
        .frames_post_processor(strip_profiler_frames)
        .build()?;
    drop(guard);
    let profile = report.pprof()?;
    let raw = profile.encode_to_vec();
    let mut gz =
        flate2::write::GzEncoder::new(Vec::with_capacity(raw.len() / 2), flate2::Compression::default());
    gz.write_all(&raw)?;
    Ok(gz.finish()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_as_go_reads_them() {
        assert_eq!(seconds(None), Ok(30));
        assert_eq!(seconds(Some("seconds=2")), Ok(2));
        assert_eq!(seconds(Some("debug=1&seconds=5")), Ok(5));
        assert_eq!(seconds(Some("seconds=0")), Ok(30));
        assert_eq!(seconds(Some("seconds=-3")), Ok(30));
        assert_eq!(seconds(Some("seconds=120")), Ok(120));
        assert!(seconds(Some("seconds=121")).unwrap_err().contains("exceeds"));
        assert!(seconds(Some("seconds=x")).unwrap_err().contains("invalid"));
    }
}
