//! The node-local interface (`-interfacename`, `nodelocaldns`) holding the `-localip`
//! addresses, through the `ip` program: a `dummy` link as node-cache makes it, or, on a kernel
//! without dummy support, a bridge with no ports (which holds an address just as well and
//! forwards nothing), logged.

use std::net::IpAddr;

use super::command::{NodeCacheError, run, run_ok};

/// What [`ensure`] found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ensured {
    /// The link was there (its addresses were made sure of).
    Existed,
    /// A dummy link was made.
    CreatedDummy,
    /// No dummy support: a port-less bridge was made.
    CreatedBridge,
}

/// True when link `name` exists.
pub fn exists(name: &str) -> Result<bool, NodeCacheError> {
    let out = run(
        "ip",
        &["-o", "link", "show", "dev", name],
        None,
        "looking up the interface",
    )?;
    Ok(out.ok)
}

/// The addresses on link `name`.
pub fn addresses(name: &str) -> Result<Vec<IpAddr>, NodeCacheError> {
    let out = run_ok(
        "ip",
        &["-o", "addr", "show", "dev", name],
        None,
        "listing the interface's addresses",
    )?;
    Ok(out
        .stdout
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            w.position(|x| x == "inet" || x == "inet6")?;
            w.next()?.split('/').next()?.parse().ok()
        })
        .collect())
}

/// Makes sure link `name` exists, is up and holds every one of `ips`.
pub fn ensure(name: &str, ips: &[IpAddr]) -> Result<Ensured, NodeCacheError> {
    let what = format!("creating interface {name}");
    let mut ensured = Ensured::Existed;
    if !exists(name)? {
        let dummy = run("ip", &["link", "add", name, "type", "dummy"], None, &what)?;
        ensured = Ensured::CreatedDummy;
        if !dummy.ok {
            let refused = super::command::failure("ip", &what, &dummy);
            if matches!(refused, NodeCacheError::NoCapability { .. }) {
                return Err(refused);
            }
            // Another instance may have made it meanwhile.
            if exists(name)? {
                ensured = Ensured::Existed;
            } else {
                tracing::warn!(
                    interface = name,
                    error = %dummy.stderr,
                    "this kernel cannot make a dummy link; using a bridge without ports instead"
                );
                run_ok("ip", &["link", "add", name, "type", "bridge"], None, &what)?;
                ensured = Ensured::CreatedBridge;
            }
        }
    }
    let have = addresses(name)?;
    for ip in ips.iter().filter(|ip| !have.contains(ip)) {
        let cidr = match ip {
            IpAddr::V4(_) => format!("{ip}/32"),
            IpAddr::V6(_) => format!("{ip}/128"),
        };
        let mut args = vec!["addr", "replace", cidr.as_str(), "dev", name];
        if ip.is_ipv6() {
            // A link without carrier never finishes duplicate address detection.
            args.push("nodad");
        }
        run_ok("ip", &args, None, &format!("adding {ip} to interface {name}"))?;
    }
    run_ok(
        "ip",
        &["link", "set", name, "up"],
        None,
        &format!("setting interface {name} up"),
    )?;
    Ok(ensured)
}

/// Deletes link `name` (and so its addresses); gone already is fine.
pub fn remove(name: &str) -> Result<(), NodeCacheError> {
    if !exists(name)? {
        return Ok(());
    }
    run_ok(
        "ip",
        &["link", "del", name],
        None,
        &format!("removing interface {name}"),
    )?;
    Ok(())
}
