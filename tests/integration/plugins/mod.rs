//! One file per plugin (or per part of a large one, `forward_*`): each directive over real
//! sockets, mostly asked with the real `dig`.

pub mod acl;
pub mod any;
pub mod autopath;
pub mod bufsize;
pub mod cancel;
pub mod chaos;
pub mod dns64;
pub mod dnstap;
pub mod fairness;
pub mod file;
pub mod forward;
pub mod forward_doh;
pub mod forward_names;
pub mod header;
pub mod loadbalance;
pub mod local;
pub mod metadata;
pub mod minimal;
pub mod noaaaa;
pub mod nsid;
pub mod pprof;
pub mod rewrite;
pub mod root;
pub mod rrl;
pub mod secondary;
pub mod serve_stale;
pub mod shed;
pub mod template;
pub mod transfer;
pub mod tsig;
pub mod view;
pub mod whoami_debug;
