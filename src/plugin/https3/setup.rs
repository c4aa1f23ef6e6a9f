//! The `https3` directive's Corefile syntax (see this folder's README), parsed into a
//! [`Https3Config`], and its [`Configured`] impl: what the configured directive sets for its block.

use std::sync::Arc;

use crate::chain::{BlockSettings, Configured, QuicOptions, SetupCtx};
use crate::corefile::{CorefileError, Directive};

/// quinn's default of concurrent bidirectional streams, what `max_streams 0` keeps.
pub const TRANSPORT_DEFAULT_STREAMS: u32 = 100;

/// A block's `https3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Https3Config(pub QuicOptions);

/// `https3 [{ max_streams N }]`: a non-negative integer, once; no arguments on the `https3`
/// line; once per server block.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    d.args().expect_none()?;
    let mut o = QuicOptions::default();
    for opt in &d.block {
        let name = opt.name.text.as_str();
        let arg = d.option_arg(opt)?;
        match name {
            "max_streams" => {
                if o.max_streams.is_some() {
                    return Err(d.error_at(&opt.name, "max_streams already defined for this server block"));
                }
                let n = arg.text.parse::<u32>().map_err(|_| {
                    d.error_at(
                        arg,
                        format!("max_streams: '{}' is not a non-negative integer", arg.text),
                    )
                })?;
                o.max_streams = Some(if n == 0 { TRANSPORT_DEFAULT_STREAMS } else { n });
            }
            other => {
                return Err(d.error_at(&opt.name, format!("unknown property '{other}' (max_streams)")));
            }
        }
    }
    Ok(Arc::new(Https3Config(o)))
}

impl Configured for Https3Config {
    fn configure(&self, settings: &mut BlockSettings) {
        settings.listener.https3 = Some(self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<QuicOptions, String> {
        let c = crate::chain::set_up(text, setup)?;
        let mut s = BlockSettings::default();
        c.configure(&mut s);
        s.listener.https3.ok_or_else(|| "not set".to_owned())
    }

    #[test]
    fn max_streams_as_coredns_reads_it() {
        assert_eq!(parse("https3").unwrap(), QuicOptions::default());
        assert_eq!(
            parse("https3 {\n max_streams 50\n}").unwrap().max_streams,
            Some(50)
        );
        assert_eq!(
            parse("https3 {\n max_streams 0\n}").unwrap().max_streams,
            Some(TRANSPORT_DEFAULT_STREAMS)
        );
        for (text, want) in [
            ("https3 {\n max_streams -1\n}", "not a non-negative integer"),
            ("https3 {\n max_streams 1\n max_streams 2\n}", "already defined"),
            (
                "https3 {\n worker_pool_size 2\n}",
                "unknown property 'worker_pool_size'",
            ),
            ("https3 x", "Corefile:2"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
