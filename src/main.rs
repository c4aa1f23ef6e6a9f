//! The `cluster-dns` binary: command-line flags (CoreDNS's single-dash style and GNU double-dash
//! style both work), logging, and the signal that stops the server. Everything else is in the
//! library.

use std::path::PathBuf;
use std::process::ExitCode;

use cluster_dns::config::{Config, DEFAULT_DNS_PORT};
use cluster_dns::logging::LogFormat;

const USAGE: &str = "\
cluster-dns: a Kubernetes cluster DNS server (a drop-in for CoreDNS)

Usage: cluster-dns [-conf PATH] [-dns.port PORT] [-pidfile PATH] [-quiet]
                   [--log-format FORMAT] [--check]
       cluster-dns -version | -plugins | --help

Options:
  -conf, --conf PATH       Corefile to load (default: ./Corefile)
  -dns.port, -p N          port for server blocks whose keys name none (default: 53)
  -pidfile PATH            write the process id there once serving; removed on exit
  -quiet                   no initialization output (cluster-dns prints no banner; its log
                           lines go to stdout as CoreDNS's do, see RUST_LOG)
  --log-format FORMAT      coredns (default: [LEVEL] plugin/NAME: message, as CoreDNS writes
                           its log), text (tracing's lines) or json (one object a line, the
                           log plugin's query lines too)
  --check, -check          validate the Corefile and exit (non-zero with the error)
  -version, --version      print the version as CoreDNS does and exit
  -plugins, --plugins      list the directives, as CoreDNS does, and exit
  -h, --help, -help        print this help and exit

Logging: RUST_LOG (for example RUST_LOG=debug); default info.

node-cache mode (NodeLocal DNSCache's node-cache command line, chosen by any of its flags):
  cluster-dns -localip 169.254.20.10[,IP...] [-conf /etc/Corefile] [-basecorefile PATH]
      [-upstreamsvc kube-dns] [-kubednscm DIR] [-setupinterface=BOOL] [-setupiptables=BOOL]
      [-interfacename nodelocaldns] [-syncinterval 60s] [-initialdelay 0] [-health-port 8080]
      [-metrics-listen-address 0.0.0.0:9353] [-skipteardown] [-dns.port 53]
      [-rules-backend auto|iptables|nftables] [-instance-dir /run/cluster-dns-nodelocal]
  See src/nodecache/README.md.
";

#[derive(Debug)]
struct Cli {
    conf: PathBuf,
    dns_port: u16,
    check: bool,
    log_format: LogFormat,
    pidfile: Option<PathBuf>,
}

#[derive(Debug)]
enum Action {
    Run(Cli),
    Version,
    Plugins,
    Help,
}

/// What `-version` prints, in CoreDNS's shape (`CoreDNS-1.14.7` / `linux/amd64, go1.24.1,
/// COMMIT`): the name and version, then the platform in Go's names, the compiler, the commit.
fn version_text() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    format!(
        "cluster-dns-{}\n{}/{arch}, {}, {}\n",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        env!("CLUSTER_DNS_RUSTC_VERSION"),
        env!("CLUSTER_DNS_BUILD_REVISION")
    )
}

/// What `-plugins` prints, in CoreDNS's shape: its server type and Caddyfile loaders, then
/// every directive of the registry as `dns.NAME`, in name order.
fn plugins_text() -> String {
    let names: std::collections::BTreeSet<&str> = cluster_dns::plugin::registry::PLUGINS
        .iter()
        .map(|e| e.name)
        .collect();
    let mut text =
        String::from("Server types:\n  dns\n\nCaddyfile loaders:\n  flag\n  default\n\nOther plugins:\n");
    for name in names {
        text.push_str("  dns.");
        text.push_str(name);
        text.push('\n');
    }
    text
}

fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Action, String> {
    let mut cli = Cli {
        conf: PathBuf::from("Corefile"),
        dns_port: DEFAULT_DNS_PORT,
        check: false,
        log_format: LogFormat::default(),
        pidfile: None,
    };
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with('-') => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let name = flag.trim_start_matches('-');
        if !flag.starts_with('-') || name.is_empty() || flag.starts_with("---") {
            return Err(format!("unexpected argument '{arg}'"));
        }
        let mut value = |what: &str| -> Result<String, String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => args.next().ok_or_else(|| format!("{flag} needs {what}")),
            }
        };
        match name {
            "conf" => {
                let v = value("a path")?;
                if v.is_empty() {
                    return Err(format!("{flag} needs a path"));
                }
                cli.conf = PathBuf::from(v);
            }
            "pidfile" => {
                let v = value("a path")?;
                if v.is_empty() {
                    return Err(format!("{flag} needs a path"));
                }
                cli.pidfile = Some(PathBuf::from(v));
            }
            // CoreDNS prints its banner and the zones it serves on stdout unless -quiet;
            // cluster-dns prints nothing there at start, so there is nothing to silence.
            "quiet" if inline.is_none() => {}
            "dns.port" | "p" => {
                let v = value("a port")?;
                cli.dns_port = v
                    .parse()
                    .map_err(|_| format!("{flag}: '{v}' is not a port (0-65535)"))?;
            }
            "log-format" => {
                let v = value("a format (text, coredns or json)")?;
                cli.log_format = v.parse().map_err(|e| format!("{flag}: {e}"))?;
            }
            "check" | "validate" if inline.is_none() => cli.check = true,
            "version" if inline.is_none() => return Ok(Action::Version),
            "plugins" if inline.is_none() => return Ok(Action::Plugins),
            "h" | "help" if inline.is_none() => return Ok(Action::Help),
            _ => return Err(format!("unknown flag '{flag}' (see --help)")),
        }
    }
    Ok(Action::Run(cli))
}

/// SIGTERM or SIGINT: the handlers are installed when this is called (before the server
/// starts, so a signal that comes as soon as the server logs that it serves is not lost to the
/// default action, exit 143); the future it returns completes at the first of them.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let handlers = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()));
        async move {
            match handlers {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! {
                        _ = term.recv() => tracing::info!("SIGTERM received, shutting down"),
                        _ = int.recv() => tracing::info!("SIGINT received, shutting down"),
                    }
                }
                _ => std::future::pending::<()>().await,
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// With the `mimalloc` feature (a measurement build, see BENCHMARKS.md "Allocator"), mimalloc
/// instead of glibc's malloc.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// node-cache compatible mode: `args` are node-cache's flags.
fn nodecache_main(args: Vec<String>) -> ExitCode {
    use cluster_dns::nodecache;
    let params = match nodecache::parse(args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("cluster-dns: {e}");
            return ExitCode::from(2);
        }
    };
    cluster_dns::logging::init(false, params.log_format);
    cluster_dns::cluster::heap::fix_mmap_threshold();
    if let Err(error) = cluster_dns::server::tcp::raise_nofile_limit() {
        tracing::warn!(%error, "cannot raise the open file limit; keeping the inherited one");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cluster-dns: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(async { nodecache::run(params, shutdown_signal()).await }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("cluster-dns: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if cluster_dns::nodecache::wanted(&args) {
        return nodecache_main(args);
    }
    let action = match parse_args(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("cluster-dns: {e}");
            return ExitCode::from(2);
        }
    };
    let cli = match action {
        Action::Version => {
            print!("{}", version_text());
            return ExitCode::SUCCESS;
        }
        Action::Plugins => {
            print!("{}", plugins_text());
            return ExitCode::SUCCESS;
        }
        Action::Help => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Action::Run(cli) => cli,
    };
    let config = match Config::load(&cli.conf, cli.dns_port) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cluster-dns: {e}");
            return ExitCode::FAILURE;
        }
    };
    if cli.check {
        // The files the Corefile names that start-up opens later (a kubeconfig, client TLS
        // files, manifests): each one that cannot be opened, at its file:line.
        let mut failed = false;
        for warning in &config.warnings {
            eprintln!("cluster-dns: warning: {warning}");
        }
        for (file, error) in config.unopenable_files() {
            let level = if file.needed { "" } else { "warning: " };
            eprintln!(
                "cluster-dns: {level}{}: {}: cannot open {}: {error}",
                file.at,
                file.what,
                file.path.display()
            );
            failed |= file.needed;
        }
        if failed {
            return ExitCode::FAILURE;
        }
        println!(
            "{}: OK ({} server block(s))",
            cli.conf.display(),
            config.blocks.len()
        );
        return ExitCode::SUCCESS;
    }
    cluster_dns::logging::init(config.debug(), cli.log_format);
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
    cluster_dns::cluster::heap::fix_mmap_threshold();
    // Systemd and containerd 2.x hand out a soft open-file limit of 1,024: raise it to the hard
    // one, as Go (so CoreDNS) does. The TCP connection limit stays below what results.
    match cluster_dns::server::tcp::raise_nofile_limit() {
        Ok((soft, hard)) => tracing::info!(soft, hard, "open file limit"),
        Err(error) => tracing::warn!(%error, "cannot raise the open file limit; keeping the inherited one"),
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cluster-dns: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let stop = shutdown_signal();
        let running = match cluster_dns::app::start_with_port(&config, cli.dns_port).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("{e}");
                eprintln!("cluster-dns: {e}");
                return ExitCode::FAILURE;
            }
        };
        // As CoreDNS (Caddy) does: the pid once the server is up, removed when it exits.
        if let Some(path) = &cli.pidfile
            && let Err(e) = std::fs::write(path, format!("{}\n", std::process::id()))
        {
            tracing::error!("cannot write the pidfile {}: {e}", path.display());
            eprintln!("cluster-dns: cannot write the pidfile {}: {e}", path.display());
            let _ = running.shutdown().await;
            return ExitCode::FAILURE;
        }
        stop.await;
        // Lameduck: /ready turns 503 at once, DNS keeps answering for `health { lameduck }`,
        // then the listeners stop and the process exits 0.
        let result = running.shutdown().await;
        if let Some(path) = &cli.pidfile {
            let _ = std::fs::remove_file(path);
        }
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("cluster-dns: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Action, String> {
        parse_args(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn flags_in_both_styles() {
        for args in [&["-conf", "x"][..], &["--conf", "x"], &["-conf=x"], &["--conf=x"]] {
            match parse(args) {
                Ok(Action::Run(c)) => assert_eq!(c.conf, PathBuf::from("x")),
                _ => panic!("{args:?}"),
            }
        }
        assert!(matches!(
            parse(&["--check", "-conf", "x"]),
            Ok(Action::Run(Cli { check: true, .. }))
        ));
        assert!(matches!(parse(&["-version"]), Ok(Action::Version)));
        assert!(matches!(parse(&["--help"]), Ok(Action::Help)));
        assert!(matches!(
            parse(&["-dns.port", "1053"]),
            Ok(Action::Run(Cli { dns_port: 1053, .. }))
        ));
        // CoreDNS's own flags: -p, -quiet, -pidfile, -plugins.
        assert!(matches!(
            parse(&["-p", "1053", "-quiet"]),
            Ok(Action::Run(Cli { dns_port: 1053, .. }))
        ));
        match parse(&["-pidfile", "/run/dns.pid"]) {
            Ok(Action::Run(c)) => assert_eq!(c.pidfile, Some(PathBuf::from("/run/dns.pid"))),
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse(&["-plugins"]), Ok(Action::Plugins)));
        assert!(matches!(
            parse(&["--log-format", "coredns"]),
            Ok(Action::Run(Cli {
                log_format: LogFormat::CoreDns,
                ..
            }))
        ));
        assert!(matches!(
            parse(&["-log-format=json"]),
            Ok(Action::Run(Cli {
                log_format: LogFormat::Json,
                ..
            }))
        ));
    }

    #[test]
    fn bad_flags_are_errors() {
        assert!(parse(&["-conf"]).unwrap_err().contains("needs a path"));
        assert!(parse(&["-dns.port", "99999"]).unwrap_err().contains("not a port"));
        assert!(parse(&["--frob"]).unwrap_err().contains("unknown flag"));
        assert!(
            parse(&["--log-format", "xml"])
                .unwrap_err()
                .contains("text, coredns or json")
        );
        assert!(parse(&["stray"]).unwrap_err().contains("unexpected argument"));
        assert!(parse(&["--version=1"]).is_err());
        assert!(parse(&["-pidfile"]).unwrap_err().contains("needs a path"));
        assert!(parse(&["-quiet=1"]).is_err());
    }
}
