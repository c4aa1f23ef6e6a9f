//! The process's own log lines, on stdout as CoreDNS writes them (one stream with the `log`
//! plugin's query lines), in the format the operator picks with `--log-format`:
//! - `coredns` (the default): CoreDNS's `[LEVEL] plugin/NAME: message` lines, so log alerts and
//!   parsers written for CoreDNS (`[ERROR] plugin/errors: 2 example.org. A: ...`,
//!   `[INFO] plugin/reload: ...`) match unchanged;
//! - `text`: tracing's line, with a timestamp, the level and `key=value` fields;
//! - `json`: one JSON object a line (`time`, `level`, `target`, `plugin` when a plugin wrote it,
//!   `message` and the event's fields), for log pipelines that parse JSON; the `log` plugin's
//!   query lines too (see `telemetry::logs`).
//!
//! Errors before logging is set up (a Corefile that does not parse) go to stderr.

use std::fmt;
use std::str::FromStr;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// tracing's own line.
    Text,
    /// CoreDNS's `[LEVEL] plugin/NAME: message`.
    #[default]
    CoreDns,
    /// One JSON object a line.
    Json,
}

impl FromStr for LogFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "text" => Ok(Self::Text),
            "coredns" => Ok(Self::CoreDns),
            "json" => Ok(Self::Json),
            other => Err(format!("'{other}' is not a log format (text, coredns or json)")),
        }
    }
}

/// The plugin a log line's target belongs to, as CoreDNS names it in `plugin/NAME`: a plugin's
/// own module (`cluster_dns::plugin::errors`), the cluster zone's sources (the kubernetes
/// plugin's in CoreDNS), and the runtime's reload (the reload plugin's).
fn plugin_of(target: &str) -> Option<&str> {
    if let Some(rest) = target.strip_prefix("cluster_dns::plugin::") {
        let name = rest.split("::").next().unwrap_or(rest);
        return Some(if name == "loop_detect" { "loop" } else { name });
    }
    if target.starts_with("cluster_dns::cluster") {
        return Some("kubernetes");
    }
    if target == "cluster_dns::app::reload" {
        return Some("reload");
    }
    None
}

/// An event's message and its other fields, in order.
#[derive(Default)]
struct Fields {
    message: String,
    rest: Vec<(&'static str, String)>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_owned();
        } else {
            self.rest.push((field.name(), value.to_owned()));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.rest.push((field.name(), format!("{value:?}")));
        }
    }
}

/// CoreDNS's level words.
fn coredns_level(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "ERROR",
        Level::WARN => "WARNING",
        Level::INFO => "INFO",
        Level::DEBUG | Level::TRACE => "DEBUG",
    }
}

/// `[LEVEL] plugin/NAME: message key=value...`.
#[derive(Debug, Clone, Copy)]
struct CoreDnsLines;

impl<S, N> FormatEvent<S, N> for CoreDnsLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, _ctx: &FmtContext<'_, S, N>, mut w: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let meta = event.metadata();
        let mut fields = Fields::default();
        event.record(&mut fields);
        write!(w, "[{}] ", coredns_level(meta.level()))?;
        if let Some(plugin) = plugin_of(meta.target()) {
            write!(w, "plugin/{plugin}: ")?;
        }
        write!(w, "{}", fields.message)?;
        for (k, v) in &fields.rest {
            write!(w, " {k}={v}")?;
        }
        writeln!(w)
    }
}

/// One JSON object a line.
#[derive(Debug, Clone, Copy)]
struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, _ctx: &FmtContext<'_, S, N>, mut w: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let meta = event.metadata();
        let mut fields = Fields::default();
        event.record(&mut fields);
        let mut time = String::new();
        tracing_subscriber::fmt::time::SystemTime.format_time(&mut Writer::new(&mut time))?;
        let mut line = serde_json::Map::new();
        line.insert("time".into(), time.into());
        line.insert("level".into(), meta.level().as_str().to_ascii_lowercase().into());
        line.insert("target".into(), meta.target().into());
        if let Some(plugin) = plugin_of(meta.target()) {
            line.insert("plugin".into(), plugin.into());
        }
        line.insert("message".into(), fields.message.into());
        for (k, v) in fields.rest {
            line.insert(k.into(), v.into());
        }
        writeln!(w, "{}", serde_json::Value::Object(line))
    }
}

/// Targets quietened by default (a `RUST_LOG` that names their crate wins):
/// - hickory-server logs every response at INFO; that is the `log` plugin's job here;
/// - kube-client's HTTP trace layer logs an ERROR for every failed attempt, and kube-runtime's
///   watcher a WARN for every 403: the watch task logs each distinct error once, with its whole
///   cause chain (see `cluster::watch`).
const QUIET: [&str; 4] = [
    "hickory_server=warn",
    "hickory_proto=warn",
    "kube_client::client::builder=off",
    "kube_runtime::watcher=error",
];

/// Sets up the process's logging: `RUST_LOG` when set, else `info` (with cluster-dns's own
/// messages at debug level when a block has `debug`), in `format`.
pub fn init(debug: bool, format: LogFormat) {
    let env = std::env::var("RUST_LOG").unwrap_or_default();
    let default = if debug { "info,cluster_dns=debug" } else { "info" };
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    for directive in QUIET {
        let krate = directive.split(['=', ':']).next().unwrap_or(directive);
        if !env.contains(krate)
            && let Ok(d) = directive.parse()
        {
            filter = filter.add_directive(d);
        }
    }
    use std::io::IsTerminal;
    let ansi = std::io::stdout().is_terminal() && format == LogFormat::Text;
    crate::telemetry::logs::set_json(format == LogFormat::Json);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stdout);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::CoreDns => builder.event_format(CoreDnsLines).init(),
        LogFormat::Json => builder.event_format(JsonLines).init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse_and_plugins_are_named_as_coredns_does() {
        assert_eq!("coredns".parse(), Ok(LogFormat::CoreDns));
        assert_eq!("json".parse(), Ok(LogFormat::Json));
        assert_eq!("text".parse(), Ok(LogFormat::Text));
        assert!(
            "xml"
                .parse::<LogFormat>()
                .unwrap_err()
                .contains("text, coredns or json")
        );
        assert_eq!(plugin_of("cluster_dns::plugin::errors"), Some("errors"));
        assert_eq!(
            plugin_of("cluster_dns::plugin::forward::handler"),
            Some("forward")
        );
        assert_eq!(plugin_of("cluster_dns::plugin::loop_detect::probe"), Some("loop"));
        assert_eq!(plugin_of("cluster_dns::cluster::watch::task"), Some("kubernetes"));
        assert_eq!(plugin_of("cluster_dns::app::reload"), Some("reload"));
        assert_eq!(plugin_of("cluster_dns::app::listen"), None);
    }
}
