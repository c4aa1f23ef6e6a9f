//! Node-cache mode's errors, and running the node's networking programs (`ip`, `iptables`,
//! `ip6tables`, `nft`) with errors that name the missing program or capability.

use std::io::Write;
use std::process::{Command, Stdio};

/// What setting up the node failed on.
#[derive(Debug, thiserror::Error)]
pub enum NodeCacheError {
    #[error("the `{program}` program is not on PATH ({what} needs it: install {package})")]
    MissingProgram {
        program: String,
        package: &'static str,
        what: String,
    },
    #[error(
        "{what} needs the NET_ADMIN capability (run as root or add NET_ADMIN to the container's \
         securityContext.capabilities): {program}: {detail}"
    )]
    NoCapability {
        program: String,
        what: String,
        detail: String,
    },
    #[error("{what} failed: {program}: {detail}")]
    Failed {
        program: String,
        what: String,
        detail: String,
        /// The program's exit code (iptables exits 4 when the xtables lock is held).
        code: Option<i32>,
    },
    #[error("{0}")]
    Other(String),
}

impl NodeCacheError {
    /// True when the failure is another program holding the xtables lock.
    pub fn is_lock(&self) -> bool {
        matches!(self, Self::Failed { detail, code, .. }
            if code == &Some(4) || detail.contains("xtables lock"))
    }
}

/// The package that brings `program`.
fn package(program: &str) -> &'static str {
    match program {
        "ip" => "iproute2",
        "nft" => "nftables",
        _ => "iptables",
    }
}

/// The output of a run: exit status and what it printed.
#[derive(Debug)]
pub struct Output {
    pub ok: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `program args` (with `stdin` fed when given) for `what`; a program that cannot be
/// started is [`NodeCacheError::MissingProgram`]. The caller judges the exit status.
pub fn run(program: &str, args: &[&str], stdin: Option<&str>, what: &str) -> Result<Output, NodeCacheError> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => NodeCacheError::MissingProgram {
            program: program.to_owned(),
            package: package(program),
            what: what.to_owned(),
        },
        _ => NodeCacheError::Other(format!("{what}: cannot run {program}: {e}")),
    })?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let _ = pipe.write_all(text.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| NodeCacheError::Other(format!("{what}: {program}: {e}")))?;
    Ok(Output {
        ok: out.status.success(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    })
}

/// Runs `program args` and fails unless it exits 0; a refusal for want of privilege is
/// [`NodeCacheError::NoCapability`].
pub fn run_ok(
    program: &str,
    args: &[&str],
    stdin: Option<&str>,
    what: &str,
) -> Result<Output, NodeCacheError> {
    let out = run(program, args, stdin, what)?;
    if out.ok {
        return Ok(out);
    }
    Err(failure(program, what, &out))
}

/// The error for a run that failed.
pub fn failure(program: &str, what: &str, out: &Output) -> NodeCacheError {
    let detail = if out.stderr.is_empty() {
        format!("exit code {:?}", out.code)
    } else {
        out.stderr.clone()
    };
    if is_permission(&detail) {
        NodeCacheError::NoCapability {
            program: program.to_owned(),
            what: what.to_owned(),
            detail,
        }
    } else {
        NodeCacheError::Failed {
            program: program.to_owned(),
            what: what.to_owned(),
            detail,
            code: out.code,
        }
    }
}

/// How `ip`, `iptables` and `nft` word EPERM/EACCES.
fn is_permission(stderr: &str) -> bool {
    let s = stderr.to_ascii_lowercase();
    s.contains("operation not permitted") || s.contains("permission denied") || s.contains("you must be root")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_program_is_named() {
        let e = run_ok("no-such-program-nodecache", &[], None, "adding the rules").unwrap_err();
        assert!(matches!(e, NodeCacheError::MissingProgram { .. }));
        assert!(
            e.to_string()
                .contains("`no-such-program-nodecache` program is not on PATH"),
            "{e}"
        );
    }

    #[test]
    fn eperm_names_net_admin() {
        let out = Output {
            ok: false,
            code: Some(2),
            stdout: String::new(),
            stderr: "RTNETLINK answers: Operation not permitted".into(),
        };
        let e = failure("ip", "creating interface nodelocaldns", &out);
        assert!(e.to_string().contains("NET_ADMIN"), "{e}");
        let lock = Output {
            ok: false,
            code: Some(4),
            stdout: String::new(),
            stderr: "Another app is currently holding the xtables lock.".into(),
        };
        assert!(failure("iptables", "x", &lock).is_lock());
    }
}
