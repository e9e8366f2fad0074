//! The client side of the ACL: RocketMQ's `SessionCredentials` and `AclClientRPCHook`.

use super::acl_utils::{
    cal_signature, combine_request_content, ACCESS_KEY, SECURITY_TOKEN, SIGNATURE,
};
use crate::remoting::client::RpcHook;
use crate::remoting::RemotingCommand;

/// An account of the broker's `plain_acl.yml`.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionCredentials {
    pub access_key: String,
    pub secret_key: String,
    /// Sent and signed when set; the plain ACL does not check it.
    pub security_token: Option<String>,
}

impl std::fmt::Debug for SessionCredentials {
    /// Without the secret key, so that credentials never reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionCredentials")
            .field("access_key", &self.access_key)
            .finish_non_exhaustive()
    }
}

/// Signs every request a client sends, as the Java client's `AclClientRPCHook` does.
#[derive(Debug, Clone)]
pub(crate) struct AclClientRpcHook {
    pub credentials: SessionCredentials,
}

impl RpcHook for AclClientRpcHook {
    /// `doBeforeRequest`: adds the access key (and security token), then the signature over
    /// every other ext field and the body. Run it last, once the request is complete.
    fn do_before_request(&self, request: &mut RemotingCommand) {
        let c = &self.credentials;
        request
            .ext_fields
            .insert(ACCESS_KEY.to_owned(), c.access_key.clone());
        if let Some(token) = &c.security_token {
            request
                .ext_fields
                .insert(SECURITY_TOKEN.to_owned(), token.clone());
        }
        let content = combine_request_content(&request.ext_fields, &request.body, &[SIGNATURE]);
        let signature = cal_signature(&content, &c.secret_key);
        request.ext_fields.insert(SIGNATURE.to_owned(), signature);
    }
}
