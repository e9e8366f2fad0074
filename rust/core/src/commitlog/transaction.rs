//! What a producer and a broker agree makes a send a half message: `TRAN_MSG=true` and
//! `MessageSysFlag`'s transaction bits.

use super::record::find_property;

/// `MessageConst.PROPERTY_TRANSACTION_PREPARED`.
pub(crate) const PROPERTY_TRANSACTION_PREPARED: &str = "TRAN_MSG";

/// `MessageSysFlag`'s transaction bits.
pub(crate) mod sys_flag {
    pub(crate) const TRANSACTION_PREPARED_TYPE: i32 = 0x1 << 2;
    pub(crate) const TRANSACTION_COMMIT_TYPE: i32 = 0x2 << 2;
    pub(crate) const TRANSACTION_ROLLBACK_TYPE: i32 = 0x3 << 2;
    pub(crate) const MASK: i32 = 0x3 << 2;
}

/// `Boolean.parseBoolean` of `TRAN_MSG`: the send is a half message.
pub(crate) fn is_transactional(properties: &[u8]) -> bool {
    find_property(properties, PROPERTY_TRANSACTION_PREPARED)
        .is_some_and(|v| v.eq_ignore_ascii_case(b"true"))
}
