//! RocketMQ's ACL 1.0 ("plain" ACL) on the client port, compatible with the Java client's
//! `AclClientRPCHook`.
//!
//! - `acl_utils`: the signed content (ext fields sorted by key, their values concatenated,
//!   then the body) and its HmacSHA1 signature, base64 encoded (`AclUtils`, `AclSigner`).
//! - `AclClientRpcHook`: what a client adds to every request (`AccessKey`, optional
//!   `SecurityToken`, `Signature`).
//! - `permission`: `Permission`'s bits, `plain_acl.yml`'s permission strings, the admin codes.
//! - `remote_address`: `RemoteAddressStrategy`, the `whiteRemoteAddress` patterns.
//! - `plain_permission_manager`: `plain_acl.yml` (accounts, global white addresses), checked
//!   for changes and reloaded; a file that does not load keeps the policy in force.
//! - `plain_access_resource`: `PlainAccessResource`, a request as the ACL sees it.
//! - `plain_access_validator`: `PlainAccessValidator.parse`, what a request needs, by code.

pub(crate) mod acl_utils;
mod client_hook;
pub(crate) mod permission;
mod plain_access_resource;
pub(crate) mod plain_access_validator;
pub(crate) mod plain_permission_manager;
pub(crate) mod remote_address;

pub(crate) use client_hook::AclClientRpcHook;
pub use client_hook::SessionCredentials;
pub(crate) use plain_permission_manager::{AclError, PlainPermissionManager};
