//! Each option of the `kubernetes` block, read on its own: its values ([`PodMode`], the `ttl`
//! bound), its arguments and its mistakes, reported at its line as
//! `Corefile:7: kubernetes: ttl: ...`. One function per option (or family of options); the
//! options that together say where the objects come from are gathered as written
//! ([`SourceOptions`]) and resolved once the block is read. `setup::parse` dispatches to them
//! and checks what spans options.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::selector::check_selector;
use crate::cluster::watch::ApiSource;
use crate::corefile::{Args, CorefileError, Directive, Token, normalize_zone_or_cidr, parse_duration};
use crate::proto::is_dns_label;

/// How pod records (`1-2-3-4.ns.pod.cluster.local`) are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodMode {
    /// No pod records (`pods disabled`, the default).
    Disabled,
    /// The address in the name, for any namespace that exists (`pods insecure`).
    Insecure,
    /// Only the addresses of live pods in that namespace (`pods verified`).
    Verified,
}

/// The largest `ttl` (CoreDNS's).
pub const MAX_TTL: u32 = 3600;

/// One option line of the `kubernetes` block: its arguments, and its errors, which point at its
/// line as `kubernetes: NAME: ...`.
#[derive(Debug)]
pub(super) struct Opt<'a> {
    /// The `kubernetes` directive.
    pub(super) d: &'a Directive,
    /// The option's line.
    pub(super) line: &'a Directive,
}

impl<'a> Opt<'a> {
    /// The option's name.
    pub(super) fn name(&self) -> &'a str {
        self.line.name.text.as_str()
    }

    /// A cursor at the option's first argument.
    fn args(&self) -> Args<'a> {
        Args::new(self.line)
    }

    /// `msg` about this option, at its line.
    pub(super) fn fail(&self, msg: String) -> CorefileError {
        self.d
            .error_at(&self.line.name, format!("{}: {msg}", self.name()))
    }

    /// The error for an option cluster-dns does not take: one CoreDNS removed, or an unknown
    /// one.
    pub(super) fn refused(&self) -> CorefileError {
        let at = &self.line.name;
        match self.name() {
            name @ ("resyncperiod" | "upstream") => self.d.error_at(
                at,
                format!(
                    "'{name}' was removed from CoreDNS (ignored since 1.6, an error since 1.7): delete this line"
                ),
            ),
            other => self.d.error_at(at, format!("unknown property '{other}'")),
        }
    }
}

/// The options that say where the objects come from, as written; which one wins, and which
/// may not be combined, is decided once the whole block is read ([`SourceOptions::resolve`]).
#[derive(Debug, Default)]
pub(super) struct SourceOptions<'a> {
    /// `endpoint URL...`: the first URL.
    pub(super) endpoint: Option<&'a Token>,
    /// `kubeconfig PATH [CONTEXT]`.
    pub(super) kubeconfig: Option<(&'a Token, Option<String>)>,
    /// `manifests PATH...`: where the first `manifests` is, and every file of all of them.
    pub(super) manifests: Option<(&'a Token, Vec<PathBuf>)>,
    /// Where `tls` is, when given.
    pub(super) tls_at: Option<&'a Token>,
}

impl SourceOptions<'_> {
    /// The source: `manifests` alone (not with `endpoint`, `kubeconfig` or `tls`), else
    /// `kubeconfig` (which wins over `endpoint`, as in CoreDNS), else `endpoint`, else the
    /// in-cluster service account.
    pub(super) fn resolve(self, d: &Directive) -> Result<ApiSource, CorefileError> {
        Ok(match (self.manifests, self.kubeconfig, self.endpoint) {
            (Some((at, _)), Some(_), _) | (Some((at, _)), _, Some(_)) => {
                return Err(d.error_at(
                    at,
                    "'manifests' cannot be combined with 'endpoint' or 'kubeconfig': objects come either from files or from the API",
                ));
            }
            (Some((at, _)), None, None) if self.tls_at.is_some() => {
                return Err(d.error_at(
                    at,
                    "'manifests' cannot be combined with 'tls', which is for the API connection",
                ));
            }
            (Some((_, paths)), None, None) => ApiSource::Manifests(paths),
            (None, Some((path, context)), url) => {
                if let Some(url) = url {
                    tracing::warn!(at = %url.loc, "kubernetes: 'kubeconfig' is set, so 'endpoint' is ignored");
                }
                ApiSource::Kubeconfig {
                    path: PathBuf::from(&path.text),
                    context,
                }
            }
            (None, None, Some(url)) => ApiSource::Endpoint(url.text.clone()),
            (None, None, None) => ApiSource::InCluster,
        })
    }
}

/// `endpoint URL...`: the first URL (checked); more are deprecated, with a warning.
pub(super) fn parse_endpoint<'a>(opt: &Opt<'a>) -> Result<&'a Token, CorefileError> {
    let urls = opt.args().remaining();
    let first = urls
        .first()
        .ok_or_else(|| opt.fail("expected the API server's URL, e.g. https://10.0.0.1:6443".into()))?;
    check_url(&first.text).map_err(|m| opt.fail(m))?;
    if urls.len() > 1 {
        tracing::warn!(
            at = %opt.line.name.loc,
            endpoint = %first.text,
            "kubernetes: several endpoints are deprecated; only the first is used"
        );
    }
    Ok(first)
}

/// `kubeconfig PATH [CONTEXT]`: the file (not empty) and the context, if given.
pub(super) fn parse_kubeconfig<'a>(opt: &Opt<'a>) -> Result<(&'a Token, Option<String>), CorefileError> {
    const USAGE: &str = "expected a kubeconfig file and an optional context: kubeconfig PATH [CONTEXT]";
    let [path, rest @ ..] = opt.args().remaining() else {
        return Err(opt.fail(USAGE.into()));
    };
    let context = match rest {
        [] => None,
        [ctx] => Some(ctx.text.clone()),
        [_, extra, ..] => {
            return Err(opt.fail(format!("unexpected argument '{}': {USAGE}", extra.text)));
        }
    };
    if path.text.is_empty() {
        return Err(opt.fail("the kubeconfig path is empty".into()));
    }
    Ok((path, context))
}

/// `manifests PATH...`: adds the files, relative to `corefile_dir`, to `manifests` (which keeps
/// where the first `manifests` line is).
pub(super) fn parse_manifests<'a>(
    opt: &Opt<'a>,
    corefile_dir: &Path,
    manifests: &mut Option<(&'a Token, Vec<PathBuf>)>,
) -> Result<(), CorefileError> {
    let files = opt.args().remaining();
    if files.is_empty() {
        return Err(opt.fail("expected one or more Kubernetes YAML files: manifests PATH...".into()));
    }
    let (_, paths) = manifests.get_or_insert_with(|| (&opt.line.name, Vec::new()));
    for f in files {
        if f.text.is_empty() {
            return Err(opt.fail("empty file name".into()));
        }
        paths.push(corefile_dir.join(&f.text));
    }
    Ok(())
}

/// `tls CERT KEY CACERT`: the three files, relative to the Corefile's folder, as `manifests`
/// (not the working directory).
pub(super) fn parse_tls(
    opt: &Opt<'_>,
    corefile_dir: &Path,
) -> Result<(PathBuf, PathBuf, PathBuf), CorefileError> {
    let [cert, key, ca] = opt.args().remaining() else {
        return Err(opt.fail("expected three files: tls CERT KEY CACERT".into()));
    };
    let [cert, key, ca] = [cert, key, ca].map(|t| corefile_dir.join(&t.text));
    Ok((cert, key, ca))
}

/// `namespaces NAMESPACE...`: adds the names, lower-cased and checked, to `namespaces` (each
/// once).
pub(super) fn parse_namespaces(opt: &Opt<'_>, namespaces: &mut Vec<String>) -> Result<(), CorefileError> {
    let list = opt.args().remaining();
    if list.is_empty() {
        return Err(opt.fail("expected one or more namespaces: namespaces NAMESPACE...".into()));
    }
    for ns in list {
        let lower = ns.text.to_ascii_lowercase();
        if !is_dns_label(&lower) {
            return Err(opt.fail(format!(
                "'{}' is not a valid namespace name (lower-case letters, digits and '-', at most 63)",
                ns.text
            )));
        }
        if !namespaces.contains(&lower) {
            namespaces.push(lower);
        }
    }
    Ok(())
}

/// `labels SELECTOR` and `namespace_labels SELECTOR`: the words joined by spaces, checked as a
/// label selector.
pub(super) fn parse_selector(opt: &Opt<'_>) -> Result<String, CorefileError> {
    let words = opt.args().remaining();
    if words.is_empty() {
        return Err(opt.fail("expected a label selector, e.g. 'app=dns,tier notin (test)'".into()));
    }
    let selector = words
        .iter()
        .map(|t| t.text.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    check_selector(&selector)
        .map_err(|why| opt.fail(format!("'{selector}' is not a valid label selector: {why}")))?;
    Ok(selector)
}

/// `pods disabled|insecure|verified`.
pub(super) fn parse_pods(opt: &Opt<'_>) -> Result<PodMode, CorefileError> {
    let mode = opt
        .args()
        .single("one of disabled, insecure, verified")
        .map_err(|m| opt.fail(m))?;
    match mode.text.as_str() {
        "disabled" => Ok(PodMode::Disabled),
        "insecure" => Ok(PodMode::Insecure),
        "verified" => Ok(PodMode::Verified),
        other => Err(opt.fail(format!("'{other}' is not one of disabled, insecure, verified"))),
    }
}

/// An option that is a switch (`endpoint_pod_names`, `noendpoints`): no arguments; on.
pub(super) fn parse_flag(opt: &Opt<'_>) -> Result<bool, CorefileError> {
    opt.args().none().map_err(|m| opt.fail(m))?;
    Ok(true)
}

/// `ttl SECONDS`: from 0 to [`MAX_TTL`].
pub(super) fn parse_ttl(opt: &Opt<'_>) -> Result<u32, CorefileError> {
    let v = opt
        .args()
        .single("a number of seconds from 0 to 3600")
        .map_err(|m| opt.fail(m))?;
    match v.text.parse::<i64>() {
        Ok(t) if (0..=i64::from(MAX_TTL)).contains(&t) => Ok(u32::try_from(t).unwrap_or(MAX_TTL)),
        Ok(t) => Err(opt.fail(format!(
            "{t} is out of range: the ttl must be from 0 to {MAX_TTL} seconds"
        ))),
        Err(_) => Err(opt.fail(format!(
            "'{}' is not a whole number of seconds from 0 to {MAX_TTL}",
            v.text
        ))),
    }
}

/// `fallthrough [ZONES...]`: the zones, normalized, each once (none: all of the plugin's).
pub(super) fn parse_fallthrough(opt: &Opt<'_>) -> Result<Vec<String>, CorefileError> {
    let mut zones = Vec::new();
    for z in opt.args().remaining() {
        let z = normalize_zone_or_cidr(&z.text).map_err(|m| opt.fail(m))?;
        if !zones.contains(&z) {
            zones.push(z);
        }
    }
    Ok(zones)
}

/// `multicluster ZONES...`: the zones answered from ServiceImports (normalized). Each must be
/// one of the plugin's own forward zones (`zones`): CoreDNS says the plugin MUST be
/// authoritative for them, and a zone it is not would never see a question. Without zones,
/// CoreDNS takes none (the option does nothing); so does this, with a warning.
pub(super) fn parse_multicluster(opt: &Opt<'_>, zones: &[String]) -> Result<Vec<String>, CorefileError> {
    let mut out = Vec::new();
    for t in opt.args().remaining() {
        let z = normalize_zone_or_cidr(&t.text).map_err(|m| opt.fail(m))?;
        if crate::corefile::is_reverse_zone(&z) {
            return Err(opt.fail(format!(
                "'{z}' is a reverse zone: multicluster zones hold service names"
            )));
        }
        if !zones.contains(&z) {
            return Err(opt.fail(format!(
                "'{z}' is not one of the plugin's zones ({}): add it, e.g. 'kubernetes {} {z}'",
                zones.join(" "),
                zones.first().map(String::as_str).unwrap_or("cluster.local."),
            )));
        }
        if !out.contains(&z) {
            out.push(z);
        }
    }
    if out.is_empty() {
        tracing::warn!(at = %opt.line.name.loc, "kubernetes: 'multicluster' without zones does nothing");
    }
    Ok(out)
}

/// `ignore empty_service`, the only thing there is to ignore; on.
pub(super) fn parse_ignore(opt: &Opt<'_>) -> Result<bool, CorefileError> {
    let what = opt.args().single("'empty_service'").map_err(|m| opt.fail(m))?;
    if what.text != "empty_service" {
        return Err(opt.fail(format!(
            "cannot ignore '{}': the only choice is 'empty_service'",
            what.text
        )));
    }
    Ok(true)
}

/// `startup_timeout DURATION`.
pub(super) fn parse_startup_timeout(opt: &Opt<'_>) -> Result<Duration, CorefileError> {
    let v = opt
        .args()
        .single("a duration, e.g. 5s or 1m30s")
        .map_err(|m| opt.fail(m))?;
    parse_duration(&v.text)
        .ok_or_else(|| opt.fail(format!("'{}' is not a duration (e.g. 5s, 500ms, 1m30s)", v.text)))
}

/// `apiserver_qps QPS`: a non-negative number.
pub(super) fn parse_qps(opt: &Opt<'_>) -> Result<f32, CorefileError> {
    let v = opt
        .args()
        .single("a number of queries per second")
        .map_err(|m| opt.fail(m))?;
    let qps = v.text.parse::<f32>().ok().filter(|q| q.is_finite() && *q >= 0.0);
    qps.ok_or_else(|| opt.fail(format!("'{}' is not a non-negative number", v.text)))
}

/// `apiserver_burst N` and `apiserver_max_inflight N`: a non-negative whole number.
pub(super) fn parse_count(opt: &Opt<'_>) -> Result<u32, CorefileError> {
    let v = opt.args().single("a whole number").map_err(|m| opt.fail(m))?;
    v.text
        .parse::<u32>()
        .map_err(|_| opt.fail(format!("'{}' is not a non-negative whole number", v.text)))
}

/// An API server URL: `http(s)://host[:port][/path]` or `host:port`, without spaces.
fn check_url(url: &str) -> Result<(), String> {
    if url.is_empty() || url.contains(char::is_whitespace) {
        return Err(format!("'{url}' is not a URL"));
    }
    if let Some((scheme, rest)) = url.split_once("://") {
        if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
            return Err(format!(
                "'{url}': the API server is reached over https:// (or http://), not {scheme}://"
            ));
        }
        if rest.is_empty() || rest.starts_with('/') {
            return Err(format!("'{url}' has no host"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_selectors_and_urls_never_panic() {
        const PIECES: &[&str] = &[
            "a", "=", "!", "(", ")", ",", " ", "in", "notin", "/", ".", "-", "é", "<", "://",
        ];
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let text: String = (0..seed % 12)
                .map(|i| PIECES[((seed >> (i * 4)) % PIECES.len() as u64) as usize])
                .collect();
            let _ = check_selector(&text);
            let _ = check_url(&text);
        }
    }
}
