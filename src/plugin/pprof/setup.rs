//! The `pprof` directive's Corefile syntax, as CoreDNS 1.14.7 reads it:
//! `pprof [ADDRESS] { block [RATE] }`, once per server block. ADDRESS is `HOST:PORT` with an IP
//! address or `localhost`, or `:PORT`; `block` is taken and warned about (Go's block profile
//! has no Rust counterpart).

use std::net::SocketAddr;
use std::sync::Arc;

use crate::chain::{BlockSettings, Configured, HttpRoute, SetupCtx};
use crate::corefile::{CorefileError, Directive, Token, parse_http_addr};

/// CoreDNS's default address.
pub const DEFAULT_ADDR: &str = "localhost:6053";

/// `pprof`, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PprofConfig {
    /// Where `/debug/pprof/` listens.
    pub addr: SocketAddr,
    /// `block [RATE]`, where it is written: accepted, not acted on.
    pub block: Option<Token>,
}

/// The `pprof` directive's setup (once per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    let mut args = d.args();
    let addr = match args.next() {
        Some(t) => parse_http_addr(&t.text).map_err(|e| d.error_at(t, e))?,
        None => parse_http_addr(DEFAULT_ADDR).map_err(|e| d.error(e))?,
    };
    args.expect_none()?;
    let mut block = None;
    for opt in &d.block {
        match opt.name.text.as_str() {
            "block" => {
                match opt.args.as_slice() {
                    [] => {}
                    [rate] => {
                        if rate.text.parse::<i64>().is_err() {
                            return Err(d.error_at(
                                rate,
                                format!("property 'block' invalid integer value '{}'", rate.text),
                            ));
                        }
                    }
                    [_, extra, ..] => {
                        return Err(d.error_at(extra, "block takes at most one argument (RATE)"));
                    }
                }
                block = Some(opt.name.clone());
            }
            other => {
                return Err(d.error_at(&opt.name, format!("unknown property '{other}' (block)")));
            }
        }
    }
    Ok(Arc::new(PprofConfig { addr, block }))
}

impl Configured for PprofConfig {
    fn configure(&self, settings: &mut BlockSettings) {
        settings.http.push(HttpRoute {
            addr: self.addr,
            path: "/debug/pprof",
            router: Arc::new(|_| super::handler::router()),
            beside: None,
        });
    }

    fn warnings(&self, _block: &[(&'static str, Arc<dyn Configured>)]) -> Vec<CorefileError> {
        self.block
            .iter()
            .map(|t| {
                t.error(
                    "pprof: block profiling is Go's (runtime.SetBlockProfileRate) and has no counterpart here; 'block' is ignored",
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::any::Any;

    fn parse(text: &str) -> Result<PprofConfig, String> {
        let c = crate::chain::set_up(text, setup)?;
        let any: &dyn Any = c.as_ref();
        Ok(any.downcast_ref::<PprofConfig>().unwrap().clone())
    }

    #[test]
    fn addresses_and_block() {
        assert_eq!(parse("pprof").unwrap().addr, "127.0.0.1:6053".parse().unwrap());
        assert_eq!(
            parse("pprof 10.9.8.7:6060").unwrap().addr,
            "10.9.8.7:6060".parse().unwrap()
        );
        assert_eq!(parse("pprof :6060").unwrap().addr.port(), 6060);
        let c = parse("pprof :6060 {\n block\n}").unwrap();
        assert!(c.block.is_some());
        assert!(parse("pprof {\n block 5\n}").unwrap().block.is_some());
        assert!(parse("pprof").unwrap().block.is_none());
    }

    #[test]
    fn bad_arguments_name_their_line() {
        for (text, want) in [
            ("pprof nohost", "is not an address"),
            ("pprof :6060 :6061", "unexpected argument ':6061'"),
            ("pprof {\n block x\n}", "invalid integer value 'x'"),
            ("pprof {\n block 1 2\n}", "at most one argument"),
            ("pprof {\n memory\n}", "unknown property 'memory'"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.starts_with("Corefile:"), "{text}: {err}");
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
