//! The `dnstap` directive's Corefile syntax, as CoreDNS 1.14.7 reads it:
//!
//! `dnstap SOCKET [full] [WRITEBUFFER] [QUEUE] { identity ID; version V; extra E; skipverify }`
//!
//! SOCKET is `unix:///path` (or a bare path), `tcp://host:port` or `tls://host:port`.
//! `dnstap listen SOCKET [full] ...` listens on a unix or TCP SOCKET for readers to connect;
//! its `tls://` form (and `tls CERT KEY [CA]`) is refused as not implemented. The directive may be used more than once;
//! each use is its own output.

use std::path::PathBuf;
use std::sync::Arc;

use crate::chain::{
    AcquireCtx, AcquireError, AcquireFuture, BuildCtx, Built, Capabilities, Configured, Exchange, Observer,
    SetupCtx,
};
use crate::corefile::{CorefileError, Directive, Token};
use crate::plugin::kit::TapSink;
use crate::plugin::kit::previous;

use super::encode::Header;
use super::extra::Extra;
use super::handler::Tapper;
use super::listen::Listen;
use super::output::{Endpoint, Output};

/// The version dnstap messages carry unless configured (CoreDNS sends `CoreDNS-1.14.7`).
pub const DEFAULT_VERSION: &str = concat!("cluster-dns-", env!("CARGO_PKG_VERSION"));
/// The queue of one output holds this many messages times QUEUE (CoreDNS's `queueSize`).
pub const QUEUE_UNIT: usize = 10_000;
/// The queue of one output holds at most this many bytes times QUEUE (a bound of
/// cluster-dns's own: with `full`, a message can be 128 KiB).
pub const QUEUE_BYTES_UNIT: usize = 64 << 20;
/// The largest QUEUE (CoreDNS's bound).
pub const MAX_QUEUE: usize = 4096;
/// The largest WRITEBUFFER, in MiB (CoreDNS's bound).
pub const MAX_WRITE_BUFFER: usize = 1024;

/// One `dnstap` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnstapConfig {
    /// Where the messages go.
    pub endpoint: Endpoint,
    /// `full`: the wire messages too.
    pub full: bool,
    /// WRITEBUFFER: the TCP send buffer asked of the kernel, in MiB (1 by default).
    pub write_buffer_mib: usize,
    /// QUEUE: the queue holds `QUEUE_UNIT * queue` messages (1 by default).
    pub queue: usize,
    /// `identity` (the host name when `None`).
    pub identity: Option<String>,
    /// `version`.
    pub version: String,
    /// `extra` (its `{/LABEL}` metadata placeholders filled per message), and where it is
    /// written.
    pub extra: Option<Token>,
}

impl DnstapConfig {
    /// How many messages its queue holds.
    pub fn capacity(&self) -> usize {
        QUEUE_UNIT * self.queue
    }
}

/// The `dnstap` lines of one block, in the order written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnstapBlock {
    /// One per line.
    pub taps: Vec<DnstapConfig>,
}

/// The `dnstap` directive's setup: each use in a block is added after the earlier ones.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    let mut taps = previous::<DnstapBlock>(ctx)
        .map(|p| p.taps.clone())
        .unwrap_or_default();
    taps.push(parse(d)?);
    Ok(Arc::new(DnstapBlock { taps }))
}

fn endpoint(d: &Directive, t: &Token) -> Result<Endpoint, CorefileError> {
    let s = t.text.as_str();
    for scheme in ["tcp", "tls"] {
        let Some(hostport) = s.strip_prefix(scheme).and_then(|r| r.strip_prefix("://")) else {
            continue;
        };
        let ok = hostport
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p != 0));
        if !ok {
            return Err(d.error_at(t, format!("'{s}': expected {scheme}://HOST:PORT")));
        }
        if scheme == "tls" && super::tls::server_name(hostport).is_none() {
            return Err(d.error_at(t, format!("'{s}': HOST is neither a name nor an IP address")));
        }
        return Ok(match scheme {
            "tls" => Endpoint::Tls {
                addr: hostport.to_owned(),
                skip_verify: false,
            },
            _ => Endpoint::Tcp(hostport.to_owned()),
        });
    }
    let path = s.strip_prefix("unix://").unwrap_or(s);
    if path.is_empty() || path.contains("://") {
        return Err(d.error_at(
            t,
            format!("'{s}': expected unix:///PATH, a socket path, tcp://HOST:PORT or tls://HOST:PORT"),
        ));
    }
    Ok(Endpoint::Unix(PathBuf::from(path)))
}

fn bounded(d: &Directive, t: &Token, what: &str, max: usize) -> Result<usize, CorefileError> {
    match t.text.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(d.error_at(
            t,
            format!("{what} must be a number from 1 to {max}, got '{}'", t.text),
        )),
    }
}

/// Parses one `dnstap` line.
pub fn parse(d: &Directive) -> Result<DnstapConfig, CorefileError> {
    let mut args = d.args();
    let mut first = args.expect("a SOCKET (unix:///PATH or tcp://HOST:PORT)")?;
    let listen = first.text == "listen";
    if listen {
        first = args.expect("a SOCKET to listen on after 'listen'")?;
    }
    let endpoint = match (listen, endpoint(d, first)?) {
        (false, e) => e,
        (true, Endpoint::Unix(path)) => Endpoint::Listen(Listen::Unix(path)),
        (true, Endpoint::Tcp(addr)) => Endpoint::Listen(Listen::Tcp(addr)),
        (true, _) => {
            return Err(d.error_at(
                first,
                "'dnstap listen tls://' (TLS for readers that connect) is not implemented in cluster-dns yet; use 'dnstap listen tcp://HOST:PORT' or a unix socket",
            ));
        }
    };
    let mut full = false;
    if let Some(t) = args.next() {
        if t.text != "full" {
            return Err(d.error_at(t, format!("expected 'full' after the SOCKET, got '{}'", t.text)));
        }
        full = true;
    }
    let write_buffer_mib = match args.next() {
        Some(t) => bounded(d, t, "WRITEBUFFER (MiB)", MAX_WRITE_BUFFER)?,
        None => 1,
    };
    let queue = match args.next() {
        Some(t) => bounded(d, t, "QUEUE (x10000 messages)", MAX_QUEUE)?,
        None => 1,
    };
    args.expect_none()?;
    let mut config = DnstapConfig {
        endpoint,
        full,
        write_buffer_mib,
        queue,
        identity: None,
        version: DEFAULT_VERSION.to_owned(),
        extra: None,
    };
    for opt in &d.block {
        match opt.name.text.as_str() {
            "identity" => config.identity = Some(d.option_arg(opt)?.text.clone()),
            "version" => config.version = d.option_arg(opt)?.text.clone(),
            "extra" => config.extra = Some(d.option_arg(opt)?.clone()),
            // Only a tls:// output has a certificate to skip checking.
            "skipverify" => {
                d.option_no_args(opt)?;
                if let Endpoint::Tls { skip_verify, .. } = &mut config.endpoint {
                    *skip_verify = true;
                }
            }
            "tls" if listen => {
                return Err(d.error_at(
                    &opt.name,
                    "tls for 'dnstap listen' is not implemented in cluster-dns yet",
                ));
            }
            "tls" => return Err(d.error_at(&opt.name, "tls is only valid for 'dnstap listen'")),
            other => {
                return Err(d.error_at(
                    &opt.name,
                    format!("unknown property '{other}' (identity, version, extra, skipverify)"),
                ));
            }
        }
    }
    Ok(config)
}

/// The block's tappers, as one observer.
#[derive(Debug)]
struct Tappers(Vec<Arc<Tapper>>);

impl Observer for Tappers {
    fn name(&self) -> &'static str {
        "dnstap"
    }

    fn observe(&self, x: &Exchange<'_>) {
        for t in &self.0 {
            t.observe(x);
        }
    }
}

impl Configured for DnstapBlock {
    fn acquire<'a>(&'a self, ctx: AcquireCtx<'a>) -> AcquireFuture<'a> {
        Box::pin(async move {
            let metric = ctx
                .metrics
                .and_then(|m| m.families::<super::DnstapMetrics>().ok())
                .map(|m| m.dropped);
            let mut offered = Capabilities::default();
            for config in &self.taps {
                // Kept across a reload that keeps this output: its connection stays up.
                let key = (
                    config.endpoint.clone(),
                    config.capacity(),
                    config.write_buffer_mib,
                );
                let output = ctx
                    .resources
                    .get_or_make(key, || async {
                        Ok::<_, AcquireError>(Output::start(
                            config.endpoint.clone(),
                            (config.capacity(), QUEUE_BYTES_UNIT * config.queue),
                            config.write_buffer_mib,
                            metric.clone(),
                        ))
                    })
                    .await?
                    .value;
                let tapper = Arc::new(Tapper::new(output, config.full));
                offered.offer(Arc::new(TapSink(tapper.clone())));
                offered.offer(tapper);
            }
            Ok(offered)
        })
    }

    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let tappers = ctx.capabilities.all::<Tapper>();
        if tappers.len() != self.taps.len() {
            return Built::Nothing;
        }
        for (t, config) in tappers.iter().zip(&self.taps) {
            t.set_header(Header {
                identity: config
                    .identity
                    .clone()
                    .unwrap_or_else(|| ctx.hostname.to_owned())
                    .into_bytes(),
                version: config.version.clone().into_bytes(),
                extra: config.extra.as_ref().map(|e| Extra::parse(&e.text)),
            });
        }
        Built::Observer(Arc::new(Tappers(tappers)))
    }

    /// `extra` placeholders that will not be filled: `{/LABEL}` in a block without
    /// `metadata` (always `-`), and the other `{...}` (sent as written).
    fn warnings(&self, block: &[(&'static str, Arc<dyn Configured>)]) -> Vec<CorefileError> {
        let has_metadata = block.iter().any(|(name, _)| *name == "metadata");
        let mut out = Vec::new();
        for e in self.taps.iter().filter_map(|c| c.extra.as_ref()) {
            let extra = Extra::parse(&e.text);
            if extra.has_labels() && !has_metadata {
                out.push(e.error(format!(
                    "dnstap: extra '{}': the block has no 'metadata', so its {{/LABEL}} placeholders are sent as '-'",
                    e.text
                )));
            }
            if extra.has_other_placeholders() {
                out.push(e.error(format!(
                    "dnstap: extra '{}': only {{/LABEL}} metadata placeholders are replaced; the other {{...}} are sent as written",
                    e.text
                )));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::any::Any;

    fn parse_text(text: &str) -> Result<DnstapBlock, String> {
        let c = crate::chain::set_up(text, setup)?;
        let any: &dyn Any = c.as_ref();
        Ok(any.downcast_ref::<DnstapBlock>().unwrap().clone())
    }

    fn one(text: &str) -> Result<DnstapConfig, String> {
        parse_text(text).map(|b| b.taps[0].clone())
    }

    #[test]
    fn sockets_and_arguments() {
        let c = one("dnstap /tmp/dnstap.sock").unwrap();
        assert_eq!(c.endpoint, Endpoint::Unix("/tmp/dnstap.sock".into()));
        assert_eq!((c.full, c.write_buffer_mib, c.capacity()), (false, 1, 10_000));
        let c = one("dnstap unix:///tmp/d.sock full").unwrap();
        assert_eq!(c.endpoint, Endpoint::Unix("/tmp/d.sock".into()));
        assert!(c.full);
        let c = one("dnstap tcp://example.com:6000 full 1024 2048").unwrap();
        assert_eq!(c.endpoint, Endpoint::Tcp("example.com:6000".into()));
        assert_eq!((c.write_buffer_mib, c.capacity()), (1024, 20_480_000));
        let c = one("dnstap tls://127.0.0.1:6000 full {\n skipverify\n}").unwrap();
        assert_eq!(
            c.endpoint,
            Endpoint::Tls {
                addr: "127.0.0.1:6000".into(),
                skip_verify: true
            }
        );
        let c = one("dnstap tls://dnstap.example.com:6000").unwrap();
        assert!(matches!(
            c.endpoint,
            Endpoint::Tls {
                skip_verify: false,
                ..
            }
        ));
        let c = one("dnstap listen unix:///tmp/l.sock full").unwrap();
        assert_eq!(c.endpoint, Endpoint::Listen(Listen::Unix("/tmp/l.sock".into())));
        assert!(c.full);
        let c = one("dnstap listen tcp://127.0.0.1:6001").unwrap();
        assert_eq!(c.endpoint, Endpoint::Listen(Listen::Tcp("127.0.0.1:6001".into())));
        let c = one("dnstap tcp://[::1]:6000").unwrap();
        assert_eq!(c.endpoint, Endpoint::Tcp("[::1]:6000".into()));
        let c = one("dnstap /tmp/s {\n identity my-dns-server1\n version MyDNSServer-1.2.3\n extra hi\n}")
            .unwrap();
        assert_eq!(c.identity.as_deref(), Some("my-dns-server1"));
        assert_eq!(c.version, "MyDNSServer-1.2.3");
        assert_eq!(c.extra.unwrap().text, "hi");
    }

    #[test]
    fn several_lines_make_several_outputs() {
        let cf = crate::corefile::Corefile::parse_str(
            ".:53 {\ndnstap /tmp/a full\ndnstap tcp://127.0.0.1:6000\n}\n",
            std::path::Path::new("Corefile"),
        )
        .unwrap();
        let ds = &cf.blocks[0].directives;
        let ctx = SetupCtx {
            zones: &[],
            dir: std::path::Path::new("."),
            previous: None,
            block: &[],
        };
        let first = setup(&ds[0], &ctx).unwrap();
        let ctx = SetupCtx {
            previous: Some(first.as_ref()),
            block: &[],
            ..ctx
        };
        let both = setup(&ds[1], &ctx).unwrap();
        let any: &dyn Any = both.as_ref();
        let block = any.downcast_ref::<DnstapBlock>().unwrap();
        assert_eq!(block.taps.len(), 2);
        assert!(block.taps[0].full && !block.taps[1].full);
    }

    #[test]
    fn bad_arguments_name_their_line() {
        for (text, want) in [
            ("dnstap", "expected a SOCKET"),
            ("dnstap tcp://127.0.0.1", "expected tcp://HOST:PORT"),
            ("dnstap tcp://:53", "expected tcp://HOST:PORT"),
            ("dnstap udp://1.2.3.4:5", "expected unix:///PATH"),
            ("dnstap /s nofull", "expected 'full'"),
            (
                "dnstap /s full 0",
                "WRITEBUFFER (MiB) must be a number from 1 to 1024",
            ),
            (
                "dnstap /s full 1 4097",
                "QUEUE (x10000 messages) must be a number from 1 to 4096",
            ),
            ("dnstap /s full 1 1 x", "unexpected argument 'x'"),
            ("dnstap listen tls://127.0.0.1:6000", "not implemented"),
            ("dnstap listen /s {\n tls a b\n}", "not implemented"),
            ("dnstap listen", "a SOCKET to listen on"),
            ("dnstap tls://127.0.0.1", "expected tls://HOST:PORT"),
            ("dnstap /s {\n identity\n}", "identity takes exactly one argument"),
            ("dnstap /s {\n bogus 1\n}", "unknown property 'bogus'"),
            ("dnstap /s {\n tls a b\n}", "only valid for 'dnstap listen'"),
        ] {
            let err = one(text).unwrap_err();
            assert!(err.starts_with("Corefile:"), "{text}: {err}");
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
