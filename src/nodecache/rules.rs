//! The packet-filter rules node-cache installs for each `-localip` address: NOTRACK in the raw
//! table (so DNS to and from the address skips conntrack and its UDP races) and ACCEPT in the
//! filter table (tracked-state rules no longer match untracked packets), for the DNS port over
//! UDP and TCP and the health port over TCP.
//!
//! Two backends: iptables (`iptables`/`ip6tables` programs, legacy or nft backend, the same
//! rules and comments as node-cache, so either one's teardown removes the other's), or a
//! nftables table of cluster-dns's own, `inet cluster-dns-nodelocal`, whose chains hook at
//! priority `raw` (-300, before conntrack's -200) for NOTRACK and `filter` (0) for ACCEPT,
//! replaced in one transaction whenever it differs from what was installed. [`choose`] picks
//! nftables when kube-proxy runs in nftables mode (a `kube-proxy` table exists) or when no
//! iptables program is on PATH.

use std::net::IpAddr;

use super::command::{NodeCacheError, run, run_ok};
use super::flags::RulesBackend;

/// node-cache's comments, kept so its rules and these are one and the same.
const COMMENT_NOTRACK: &str = "NodeLocal DNS Cache: skip conntrack";
const COMMENT_ACCEPT: &str = "NodeLocal DNS Cache: allow DNS traffic";
/// The nftables table of cluster-dns's own.
pub const NFT_TABLE: &str = "cluster-dns-nodelocal";

/// One rule: in `chain` of the raw (NOTRACK) or filter (ACCEPT) table, packets of `proto` to
/// (`to`) or from `ip:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub notrack: bool,
    pub chain: &'static str,
    pub proto: &'static str,
    pub to: bool,
    pub ip: IpAddr,
    pub port: u16,
}

/// node-cache's twelve rules per address.
pub fn rules_for(ips: &[IpAddr], dns_port: u16, health_port: u16) -> Vec<Rule> {
    let mut out = Vec::new();
    for &ip in ips {
        let mut add = |notrack, chain, proto, to, port| {
            out.push(Rule {
                notrack,
                chain,
                proto,
                to,
                ip,
                port,
            })
        };
        for proto in ["tcp", "udp"] {
            add(true, "PREROUTING", proto, true, dns_port);
        }
        for proto in ["tcp", "udp"] {
            add(false, "INPUT", proto, true, dns_port);
        }
        for proto in ["tcp", "udp"] {
            add(true, "OUTPUT", proto, false, dns_port);
        }
        for proto in ["tcp", "udp"] {
            add(false, "OUTPUT", proto, false, dns_port);
        }
        for proto in ["tcp", "udp"] {
            add(true, "OUTPUT", proto, true, dns_port);
        }
        add(true, "OUTPUT", "tcp", true, health_port);
        add(true, "OUTPUT", "tcp", false, health_port);
    }
    out
}

impl Rule {
    /// The iptables match and target (after `-t TABLE -X CHAIN`).
    fn iptables_args(&self) -> Vec<String> {
        let (addr, port) = if self.to {
            ("-d", "--dport")
        } else {
            ("-s", "--sport")
        };
        let (target, comment) = if self.notrack {
            ("NOTRACK", COMMENT_NOTRACK)
        } else {
            ("ACCEPT", COMMENT_ACCEPT)
        };
        [
            "-p",
            self.proto,
            addr,
            &self.ip.to_string(),
            port,
            &self.port.to_string(),
            "-j",
            target,
            "-m",
            "comment",
            "--comment",
            comment,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    fn table(&self) -> &'static str {
        if self.notrack { "raw" } else { "filter" }
    }

    /// The nftables chain of [`NFT_TABLE`] it goes in.
    fn nft_chain(&self) -> &'static str {
        match (self.notrack, self.chain) {
            (true, "PREROUTING") => "raw-prerouting",
            (true, _) => "raw-output",
            (false, "INPUT") => "filter-input",
            (false, _) => "filter-output",
        }
    }

    /// The nftables rule.
    fn nft_rule(&self) -> String {
        let family = if self.ip.is_ipv6() { "ip6" } else { "ip" };
        let (addr, port) = if self.to {
            ("daddr", "dport")
        } else {
            ("saddr", "sport")
        };
        let (verdict, comment) = if self.notrack {
            ("notrack", COMMENT_NOTRACK)
        } else {
            ("accept", COMMENT_ACCEPT)
        };
        format!(
            "{family} {addr} {} {} {port} {} {verdict} comment \"{comment}\"",
            self.ip, self.proto, self.port
        )
    }
}

/// The nftables script that replaces [`NFT_TABLE`] with `rules` in one transaction.
pub fn nft_script(rules: &[Rule]) -> String {
    let mut s =
        format!("table inet {NFT_TABLE} {{}}\ndelete table inet {NFT_TABLE}\ntable inet {NFT_TABLE} {{\n");
    for (chain, hook, priority) in [
        ("raw-prerouting", "prerouting", "raw"),
        ("raw-output", "output", "raw"),
        ("filter-input", "input", "filter"),
        ("filter-output", "output", "filter"),
    ] {
        s.push_str(&format!(
            "  chain {chain} {{\n    type filter hook {hook} priority {priority}; policy accept;\n"
        ));
        for r in rules.iter().filter(|r| r.nft_chain() == chain) {
            s.push_str(&format!("    {}\n", r.nft_rule()));
        }
        s.push_str("  }\n");
    }
    s.push_str("}\n");
    s
}

/// Where the rules go.
#[derive(Debug)]
pub enum Backend {
    /// `iptables` or `ip6tables`.
    Iptables { program: &'static str },
    /// [`NFT_TABLE`], and its listing right after it was last installed.
    Nftables { installed: Option<String> },
}

/// True when `program` is an executable file in a folder of PATH.
pub fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| {
            std::fs::metadata(d.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// True when kube-proxy's nftables table exists.
fn kube_proxy_uses_nftables() -> bool {
    ["ip", "ip6"].iter().any(|family| {
        run(
            "nft",
            &["list", "table", family, "kube-proxy"],
            None,
            "looking for kube-proxy's table",
        )
        .is_ok_and(|o| o.ok)
    })
}

/// Picks the backend for addresses of one family (`v6`), and says why.
pub fn choose(setting: RulesBackend, v6: bool) -> Result<(Backend, &'static str), NodeCacheError> {
    let program = if v6 { "ip6tables" } else { "iptables" };
    let nft = || Backend::Nftables { installed: None };
    match setting {
        RulesBackend::Iptables => Ok((Backend::Iptables { program }, "-rules-backend iptables")),
        RulesBackend::Nftables => Ok((nft(), "-rules-backend nftables")),
        RulesBackend::Auto => {
            let have_nft = on_path("nft");
            if have_nft && kube_proxy_uses_nftables() {
                Ok((nft(), "kube-proxy runs in nftables mode"))
            } else if on_path(program) {
                Ok((Backend::Iptables { program }, "the iptables program is on PATH"))
            } else if have_nft {
                Ok((nft(), "no iptables program on PATH"))
            } else {
                Err(NodeCacheError::MissingProgram {
                    program: format!("nft` or `{program}"),
                    package: "nftables or iptables",
                    what: "installing the NOTRACK rules".into(),
                })
            }
        }
    }
}

impl Backend {
    /// Its name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Iptables { program } => program,
            Self::Nftables { .. } => "nftables",
        }
    }

    /// Makes sure every rule of `rules` is in place; the number put (back) in.
    pub fn ensure(&mut self, rules: &[Rule]) -> Result<usize, NodeCacheError> {
        match self {
            Self::Iptables { program } => {
                let mut added = 0;
                for r in rules {
                    let spec = r.iptables_args();
                    let mut args = vec!["-w", "5", "-t", r.table(), "-C", r.chain];
                    args.extend(spec.iter().map(String::as_str));
                    let what = "checking a NOTRACK/ACCEPT rule";
                    let out = run(program, &args, None, what)?;
                    if out.ok {
                        continue;
                    }
                    // Exit 1 is "no such rule"; anything else is a failure to say.
                    if out.code != Some(1) {
                        return Err(super::command::failure(program, what, &out));
                    }
                    args[4] = "-I";
                    run_ok(program, &args, None, "adding a NOTRACK/ACCEPT rule")?;
                    added += 1;
                }
                Ok(added)
            }
            Self::Nftables { installed } => {
                let what = format!("listing nftables table inet {NFT_TABLE}");
                let now = run("nft", &["list", "table", "inet", NFT_TABLE], None, &what)?;
                if now.ok && installed.as_deref() == Some(now.stdout.as_str()) {
                    return Ok(0);
                }
                if !now.ok && !now.stderr.contains("No such file") {
                    return Err(super::command::failure("nft", &what, &now));
                }
                run_ok(
                    "nft",
                    &["-f", "-"],
                    Some(&nft_script(rules)),
                    &format!("installing nftables table inet {NFT_TABLE}"),
                )?;
                let listed = run_ok("nft", &["list", "table", "inet", NFT_TABLE], None, &what)?;
                *installed = Some(listed.stdout);
                Ok(rules.len())
            }
        }
    }

    /// Removes the rules (every copy of each).
    pub fn remove(&mut self, rules: &[Rule]) -> Result<(), NodeCacheError> {
        match self {
            Self::Iptables { program } => {
                let mut first_error = None;
                for r in rules {
                    let spec = r.iptables_args();
                    let mut args = vec!["-w", "5", "-t", r.table(), "-D", r.chain];
                    args.extend(spec.iter().map(String::as_str));
                    // A rule added twice (by hand, or by two instances) is deleted twice.
                    for _ in 0..16 {
                        match run(program, &args, None, "removing a NOTRACK/ACCEPT rule") {
                            Ok(o) if o.ok => continue,
                            Ok(o) if o.code == Some(1) => break,
                            Ok(o) => {
                                first_error.get_or_insert(super::command::failure(
                                    program,
                                    "removing a rule",
                                    &o,
                                ));
                                break;
                            }
                            Err(e) => {
                                first_error.get_or_insert(e);
                                break;
                            }
                        }
                    }
                }
                first_error.map_or(Ok(()), Err)
            }
            Self::Nftables { installed } => {
                *installed = None;
                let what = format!("removing nftables table inet {NFT_TABLE}");
                let out = run("nft", &["delete", "table", "inet", NFT_TABLE], None, &what)?;
                if out.ok || out.stderr.contains("No such file") {
                    Ok(())
                } else {
                    Err(super::command::failure("nft", &what, &out))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twelve_rules_per_address_as_node_cache() {
        let ip: IpAddr = "169.254.20.10".parse().unwrap();
        let rules = rules_for(&[ip, "10.96.0.10".parse().unwrap()], 53, 8080);
        assert_eq!(rules.len(), 24);
        assert_eq!(
            rules[0].iptables_args().join(" "),
            "-p tcp -d 169.254.20.10 --dport 53 -j NOTRACK -m comment --comment NodeLocal DNS Cache: skip conntrack"
        );
        let script = nft_script(&rules[..12]);
        assert!(
            script.contains("type filter hook prerouting priority raw;"),
            "{script}"
        );
        assert!(
            script.contains(
                "ip daddr 169.254.20.10 udp dport 53 notrack comment \"NodeLocal DNS Cache: skip conntrack\""
            ),
            "{script}"
        );
        assert!(
            script.contains("ip saddr 169.254.20.10 tcp sport 8080 notrack"),
            "{script}"
        );
        assert!(script.contains("chain filter-input {\n    type filter hook input priority filter; policy accept;\n    ip daddr 169.254.20.10 tcp dport 53 accept"), "{script}");
        let v6 = rules_for(&["fd00::10".parse().unwrap()], 53, 8080);
        assert!(
            v6[0]
                .nft_rule()
                .starts_with("ip6 daddr fd00::10 tcp dport 53 notrack")
        );
    }
}
