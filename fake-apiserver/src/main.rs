//! `fake-apiserver`: serves a synthetic cluster over the fake API server until killed, for
//! trying cluster-dns by hand (`kubernetes cluster.local { endpoint http://127.0.0.1:PORT }`).
//!
//! Usage: `fake-apiserver [--port P] [--services N] [--endpoints M] [--per-slice K]`

use fake_apiserver::synthetic::SyntheticCluster;
use fake_apiserver::{FakeApiServer, Options};

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let cluster = SyntheticCluster {
        services: arg(&args, "--services", 100),
        endpoints: arg(&args, "--endpoints", 1_000),
        per_slice: arg(&args, "--per-slice", 100),
        ..SyntheticCluster::default()
    };
    let port = u16::try_from(arg(&args, "--port", 0)).unwrap_or(0);
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
