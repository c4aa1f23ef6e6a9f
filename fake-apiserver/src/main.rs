//! `fake-apiserver`: serves a synthetic cluster over the fake API server until killed, for
//! trying cluster-dns by hand (`kubernetes cluster.local { endpoint http://127.0.0.1:PORT }`).
//!
//! Usage: `fake-apiserver [--port P] [--services N] [--endpoints M] [--per-slice K]
//! [--streaming-lists offered|rejected|ignored]` (how it answers `sendInitialEvents`, see
//! [`fake_apiserver::StreamingLists`]; `ignored` also says it is v1.26).

use fake_apiserver::bench::usize_arg;
use fake_apiserver::synthetic::SyntheticCluster;
use fake_apiserver::{FakeApiServer, Options, StreamingLists};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let cluster = SyntheticCluster {
        services: usize_arg(&args, "--services", 100),
        endpoints: usize_arg(&args, "--endpoints", 1_000),
        per_slice: usize_arg(&args, "--per-slice", 100),
        ..SyntheticCluster::default()
    };
    let port = u16::try_from(usize_arg(&args, "--port", 0)).unwrap_or(0);
    let streaming = args
        .iter()
        .position(|a| a == "--streaming-lists")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str);
    let (streaming_lists, version) = match streaming {
        None | Some("offered") => (StreamingLists::Offered, Options::default().version),
        Some("rejected") => (StreamingLists::Rejected, "v1.30.4".to_owned()),
        Some("ignored") => (StreamingLists::Ignored, "v1.26.15".to_owned()),
        Some(other) => {
            eprintln!("fake-apiserver: --streaming-lists takes offered, rejected or ignored, not {other}");
            std::process::exit(2);
        }
    };
    let server = FakeApiServer::start_with(Options {
        port,
        streaming_lists,
        version,
        ..Options::default()
    })
    .await?;
    let n = server
        .load(cluster.objects())
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    println!("fake-apiserver: {n} objects on {}", server.url());
    tokio::signal::ctrl_c().await?;
    Ok(())
}
