//! The node-cache instances of one node, so an upgrade has no outage: a folder per interface
//! under `-instance-dir` (`/run/cluster-dns-nodelocal/nodelocaldns/`, a hostPath shared by the
//! DaemonSet's pods) holds one file per live instance, which that instance keeps `flock`ed for
//! its whole life. The kernel drops a lock when its process dies, even by SIGKILL, so "locked"
//! is "alive" without trusting PIDs (two pods may both be PID 1); an unlocked file is a dead
//! instance's and is removed. Each file holds the instance's state (`starting`, `serving`).
//!
//! Setting up and tearing down the interface and rules happen under a second lock, `.guard`,
//! so they are serialised: an instance that stops looks for live peers under the guard and
//! tears down only when it is alone; a starting instance registers before it sets anything
//! up, so either the stopping one sees it, or the teardown happens before its own setup.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

/// The guard's file name (instance files never start with a dot).
const GUARD: &str = ".guard";

/// This instance's registration.
#[derive(Debug)]
pub struct Instances {
    dir: PathBuf,
    own: PathBuf,
    held: Flock<File>,
}

/// The guard, held until dropped.
#[derive(Debug)]
pub struct Guard(#[allow(dead_code)] Flock<File>);

/// A live peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Its file's name (`PID-NANOS`).
    pub name: String,
    /// What it wrote (`starting`, `serving`).
    pub state: String,
}

fn io_err(e: nix::errno::Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e as i32)
}

impl Instances {
    /// Registers this process in `base/interface/`, as `starting`.
    pub fn register(base: &Path, interface: &str) -> std::io::Result<Self> {
        let dir = base.join(interface);
        std::fs::create_dir_all(&dir)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let own = dir.join(format!("{}-{nanos}", std::process::id()));
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&own)?;
        let held = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| io_err(e))?;
        let mut me = Self { dir, own, held };
        me.set_state("starting")?;
        Ok(me)
    }

    /// Writes this instance's state.
    pub fn set_state(&mut self, state: &str) -> std::io::Result<()> {
        let f: &mut File = &mut self.held;
        f.set_len(0)?;
        f.rewind()?;
        f.write_all(state.as_bytes())
    }

    /// Takes the guard (waits for it).
    pub fn guard(&self) -> std::io::Result<Guard> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join(GUARD))?;
        Flock::lock(file, FlockArg::LockExclusive)
            .map(Guard)
            .map_err(|(_, e)| io_err(e))
    }

    /// The other live instances; dead ones' files are removed.
    pub fn peers(&self) -> Vec<Peer> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path == self.own || name.starts_with('.') {
                continue;
            }
            let Ok(file) = OpenOptions::new().read(true).write(true).open(&path) else {
                continue;
            };
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                // Nobody holds it: its instance is gone.
                Ok(_dead) => {
                    let _ = std::fs::remove_file(&path);
                }
                Err((mut file, _)) => {
                    let mut state = String::new();
                    let _ = file.read_to_string(&mut state);
                    out.push(Peer { name, state });
                }
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Unregisters (call under the guard, after deciding on teardown).
    pub fn leave(self) {
        let _ = std::fs::remove_file(&self.own);
        drop(self.held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_instance_is_seen_and_a_dead_one_is_swept() {
        let base = std::env::temp_dir().join(format!("nodecache-instances-{}", std::process::id()));
        let mut a = Instances::register(&base, "nl0").unwrap();
        let b = Instances::register(&base, "nl0").unwrap();
        a.set_state("serving").unwrap();
        let seen = b.peers();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].state, "serving");
        {
            let _g = b.guard().unwrap();
            // The guard is exclusive: nobody else takes it now.
            let f = OpenOptions::new()
                .write(true)
                .open(base.join("nl0").join(GUARD))
                .unwrap();
            assert!(Flock::lock(f, FlockArg::LockExclusiveNonblock).is_err());
        }
        // A file nobody holds (an instance killed by SIGKILL) is not a peer and goes away.
        let stale = base.join("nl0").join("1-1");
        std::fs::write(&stale, "serving").unwrap();
        assert_eq!(b.peers().len(), 1);
        assert!(!stale.exists());
        a.leave();
        assert!(b.peers().is_empty());
        b.leave();
        let _ = std::fs::remove_dir_all(&base);
    }
}
