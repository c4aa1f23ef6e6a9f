//! `fake-apiserver`: serves a synthetic cluster over the fake API server until killed, for
//! trying cluster-dns by hand (`kubernetes cluster.local { endpoint http://127.0.0.1:PORT }`).
//!
//! Usage: `fake-apiserver [--port P] [--services N] [--endpoints M] [--per-slice K]`

use fake_apiserver::bench::usize_arg;
use fake_apiserver::synthetic::SyntheticCluster;
use fake_apiserver::{FakeApiServer, Options};

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
    let server = FakeApiServer::start_with(Options {
        port,
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
