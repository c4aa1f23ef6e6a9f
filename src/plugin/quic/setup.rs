//! The `quic` directive's Corefile syntax (see this folder's README), parsed into a [`QuicConfig`],
//! and its [`Configured`] impl: what the configured directive sets for its block.

use std::sync::Arc;

use crate::chain::{BlockSettings, Configured, QuicOptions, SetupCtx};
use crate::corefile::{CorefileError, Directive};

/// A block's `quic`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuicConfig(pub QuicOptions);

/// `quic [{ max_streams N; worker_pool_size N }]`: positive integers, each once; no
/// arguments on the `quic` line; once per server block.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    d.args().expect_none()?;
    let mut o = QuicOptions::default();
    for opt in &d.block {
        let name = opt.name.text.as_str();
        let arg = d.option_arg(opt)?;
        let positive = |max: u64| {
            arg.text
                .parse::<u64>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| {
                    d.error_at(
                        arg,
                        format!("{name}: '{}' is not a positive integer up to {max}", arg.text),
                    )
                })
        };
        let twice = || d.error_at(&opt.name, format!("{name} already defined for this server block"));
        match name {
            "max_streams" => {
                if o.max_streams.is_some() {
                    return Err(twice());
                }
                // QUIC stream counts are 62-bit; quinn takes a u32 here.
                o.max_streams = Some(u32::try_from(positive(u64::from(u32::MAX))?).unwrap_or(u32::MAX));
            }
            "worker_pool_size" => {
                if o.workers.is_some() {
                    return Err(twice());
                }
                // tokio's semaphore holds at most usize::MAX >> 3 permits.
                let n = positive((usize::MAX >> 3) as u64)?;
                o.workers = Some(usize::try_from(n).unwrap_or(usize::MAX >> 3));
            }
            other => {
                return Err(d.error_at(
                    &opt.name,
                    format!("unknown property '{other}' (max_streams or worker_pool_size)"),
                ));
            }
        }
    }
    Ok(Arc::new(QuicConfig(o)))
}

impl Configured for QuicConfig {
    fn configure(&self, settings: &mut BlockSettings) {
        settings.listener.quic = Some(self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<QuicOptions, String> {
        let c = crate::chain::set_up(text, setup)?;
        let mut s = BlockSettings::default();
        c.configure(&mut s);
        s.listener.quic.ok_or_else(|| "not set".to_owned())
    }

    #[test]
    fn options_and_errors() {
        assert_eq!(parse("quic"), Ok(QuicOptions::default()));
        assert_eq!(
            parse("quic {\n max_streams 16\n worker_pool_size 65536\n}"),
            Ok(QuicOptions {
                max_streams: Some(16),
                workers: Some(65536)
            })
        );
        for (text, want) in [
            ("quic 5", "Corefile:2"),
            (
                "quic {\n max_streams 0\n}",
                "Corefile:3: quic: max_streams: '0' is not a positive",
            ),
            ("quic {\n max_streams -1\n}", "'-1' is not a positive"),
            ("quic {\n worker_pool_size many\n}", "Corefile:3"),
            ("quic {\n max_streams\n}", "Corefile:3"),
            ("quic {\n max_streams 1 2\n}", "Corefile:3"),
            (
                "quic {\n max_streams 1\n max_streams 2\n}",
                "Corefile:4: quic: max_streams already defined",
            ),
            (
                "quic {\n max_connections 3\n}",
                "unknown property 'max_connections'",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
