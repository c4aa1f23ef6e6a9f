//! The `root` plugin: the folder a server block's relative file paths are read from (hosts
//! files, TLS certificates and keys, kubeconfig, manifests, resolv.conf), as CoreDNS's *root*
//! sets `Config.Root`. Not in the query path: it is set up before the rest of its block and
//! every later setup reads its folder ([`crate::chain::Configured::files_dir`]). See this
//! folder's README.

pub mod setup;

pub use setup::RootConfig;
