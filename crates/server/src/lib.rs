//! The server: connections and the admission pipeline ([`session`]), client
//! tracking ([`tracking`]), pub/sub, Lua scripts ([`scripts`]), ACL users
//! ([`users`], [`acl_cmd`]), the admin
//! HTTP endpoint with metrics,
//! and the [`node::Node`] that ties them to a keyspace.

pub mod acl_cmd;
pub mod admin;
pub mod admin_client;
pub mod blocking;
pub mod client_cmd;
pub mod clients;
pub mod config_cmd;
pub mod connection;
pub mod debug_cmd;
pub mod exec_gate;
pub mod idle_poll;
pub mod internal_cmd;
pub mod introspection;
pub mod loading;
pub mod memory;
pub mod memory_report;
pub mod metrics;
pub mod monitor;
pub mod node;
pub mod notify;
pub mod persistence_cmd;
pub mod protected;
pub mod pubsub;
pub mod script_cmd;
pub mod scripts;
pub mod session;
pub mod settings;
pub mod site_acl;
pub mod thread_shard;
pub mod tls;
pub mod tracking;
pub mod transaction;
pub mod users;

pub use keyspace::Policy as EvictionPolicy;
pub use node::Node;
pub use settings::{NodeSettings, Persistence, DEFAULT_SNAPSHOT_AFTER};

/// The Redis version we answer to HELLO and INFO: the version whose command
/// set and reply shapes we implement. Clients switch features on from it
/// (Jedis, redis-py), so it must not claim commands we lack: 7.4 added hash
/// field expiry (HEXPIRE...), which deltagrid does not have.
pub const REDIS_VERSION: &str = "7.2.4";
