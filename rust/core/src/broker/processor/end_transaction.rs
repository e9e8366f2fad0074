//! RocketMQ's `EndTransactionProcessor`: END_TRANSACTION commits or rolls back a half message;
//! a commit is answered once the store settles it, as a send is.

use std::sync::Arc;

use super::answer::system_error;
use crate::broker::transaction::end::Ended;
use crate::broker::transaction::TransactionalMessageService;
use crate::broker::BrokerSettings;
use crate::remoting::{
    request_code, response_code, RemotingCommand, RequestContext, RequestProcessor,
};
use crate::store::group_transfer::PutStatus;
use crate::store::MessageStore;

/// The codes it answers.
pub(crate) const CODES: &[i32] = &[request_code::END_TRANSACTION];

pub(crate) struct EndTransactionProcessor {
    pub(crate) store: Arc<MessageStore>,
    pub(crate) settings: Arc<BrokerSettings>,
    pub(crate) transactions: Arc<TransactionalMessageService>,
}

impl RequestProcessor for EndTransactionProcessor {
    fn process(&self, request: RemotingCommand, ctx: &RequestContext) -> Option<RemotingCommand> {
        if self.settings.is_slave {
            return Some(RemotingCommand::response_to(
                &request,
                response_code::SLAVE_NOT_AVAILABLE,
                Some("Message store is slave mode, so end transaction is forbidden.".into()),
            ));
        }
        // RocketMQ's EndTransactionProcessor puts as a send does: refused before the write
        // while the SyncStateSet is too small; the half message stays for the check-back.
        if let Err(e) = self.store.check_in_sync_replicas() {
            return Some(system_error(&request, e));
        }
        let (response, next_offset) = match self.transactions.end_transaction(&request) {
            Ended::Silent => return None,
            Ended::Now(response) => return Some(response),
            Ended::AfterPut(response, next_offset) => (response, next_offset),
        };
        // A oneway end (the Java client's) is not answered: the loop drops this.
        if request.is_oneway()
            || !self
                .store
                .group_transfer()
                .is_some_and(|g| g.policy().waits())
        {
            return Some(response);
        }
        let responder = ctx.responder();
        let queued = self.store.submit_put(
            next_offset,
            Box::new(move |status| {
                let mut response = response;
                if status != PutStatus::PutOk {
                    // Stored and committed, as RocketMQ answers; the remark says what fell short.
                    response.remark = Some(format!("committed, but {status:?}"));
                }
                responder.send(response);
            }),
        );
        queued.err().map(|e| system_error(&request, e))
    }
}
