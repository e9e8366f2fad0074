//! RocketMQ's `EndTransactionProcessor`: END_TRANSACTION commits a half message (it is written
//! to its real topic, and an op message ends it) or rolls it back (only the op message), after
//! checking that the request names a half message of its producer group at its queue offset.

use super::bridge::{self, HalfInfo, Op, HALF_TOPIC, OP_TOPIC};
use super::{Outcome, TransactionalMessageService};
use crate::commitlog::transaction::sys_flag;
use crate::commitlog::AppendResult;
use crate::protocol::now_millis;
use crate::remoting::header::EndTransactionRequestHeader;
use crate::remoting::{response_code, RemotingCommand};
use crate::sync::lock;

/// What END_TRANSACTION is answered with.
pub(crate) enum Ended {
    /// Nothing: the producer does not know yet (`TRANSACTION_NOT_TYPE`), as RocketMQ answers.
    Silent,
    Now(RemotingCommand),
    /// SUCCESS once the store settles the put that ends at this offset (a SYNC_MASTER's
    /// slave holds the committed message before the producer hears it is).
    AfterPut(RemotingCommand, u64),
}

fn answer(request: &RemotingCommand, code: i32, remark: impl Into<Option<String>>) -> Ended {
    Ended::Now(RemotingCommand::response_to(request, code, remark.into()))
}

impl TransactionalMessageService {
    /// END_TRANSACTION on a master (a slave answers SLAVE_NOT_AVAILABLE before this).
    pub(crate) fn end_transaction(&self, request: &RemotingCommand) -> Ended {
        let header: EndTransactionRequestHeader = match request.decode_custom_header() {
            Ok(h) => h,
            Err(e) => return answer(request, response_code::SYSTEM_ERROR, e.to_string()),
        };
        let outcome = match header.commit_or_rollback {
            sys_flag::TRANSACTION_COMMIT_TYPE => Outcome::Commit,
            sys_flag::TRANSACTION_ROLLBACK_TYPE => Outcome::Rollback,
            0 => {
                log::info!(
                    "producer group {} does not know the outcome of transaction {} yet{}",
                    header.producer_group,
                    header.transaction_id.as_deref().unwrap_or(&header.msg_id),
                    if header.from_transaction_check == Some(true) {
                        " (check-back answer)"
                    } else {
                        ""
                    }
                );
                return Ended::Silent;
            }
            other => {
                return answer(
                    request,
                    response_code::SYSTEM_ERROR,
                    format!(
                        "commitOrRollback {other} is none of commit (8), rollback (12) or \
                         unknown (0)"
                    ),
                )
            }
        };
        match self.end(&header, outcome) {
            Ok(Some(next_offset)) => Ended::AfterPut(
                RemotingCommand::response_to(request, response_code::SUCCESS, None),
                next_offset,
            ),
            Ok(None) => answer(request, response_code::SUCCESS, None),
            Err((code, remark)) => answer(request, code, remark),
        }
    }

    /// Ends the transaction the header names; the offset the put ends at when it wrote.
    fn end(
        &self,
        header: &EndTransactionRequestHeader,
        outcome: Outcome,
    ) -> Result<Option<u64>, (i32, String)> {
        let offset = header.commit_log_offset;
        let not_found = |why: String| {
            (
                response_code::SYSTEM_ERROR,
                format!("Find prepared transaction message failed: {why}"),
            )
        };
        let record = u64::try_from(offset)
            .ok()
            .and_then(|o| self.store.look_message_by_offset(o))
            .ok_or_else(|| not_found(format!("no message at commit log offset {offset}")))?;
        let r = record.view();
        let info = HalfInfo::of(&r).ok_or_else(|| {
            not_found(format!(
                "the message at commit log offset {offset} is in topic {}, not a half message \
                 of {HALF_TOPIC}",
                String::from_utf8_lossy(r.topic)
            ))
        })?;
        check_prepare_message(header, &info, r.queue_offset)?;
        let id = info.uniq_key.as_deref().unwrap_or(&header.msg_id);
        let mut st = lock(&self.state);
        let Some(pending) = st.pending.get(&info.identity).copied() else {
            return match st.ended.by_identity.get(&info.identity) {
                // A repeat (the check-back's answer and the producer's own, say).
                Some(&before) if before == outcome => Ok(None),
                Some(before) => Err((
                    response_code::ILLEGAL_OPERATION,
                    format!(
                        "transaction {id} was {} already: {} refused",
                        before.describe(),
                        if outcome == Outcome::Commit {
                            "commit"
                        } else {
                            "rollback"
                        }
                    ),
                )),
                None => Err((
                    response_code::ILLEGAL_OPERATION,
                    format!(
                        "transaction {id} is not pending on this broker: it ended before the \
                         broker restarted, or was discarded"
                    ),
                )),
            };
        };
        self.system_topic(OP_TOPIC);
        let op = Op::new(pending.queue_offset, info.identity);
        let op_draft = op.draft(self.store.store_host(), now_millis());
        let put = match outcome {
            Outcome::Commit => {
                let real = bridge::committed(&r, &info, offset);
                // One append: the committed message never stands without its op (a restart
                // would check it again and could commit it twice), nor the op without it.
                self.store
                    .put_batch(&[real.draft(&bridge::as_draft(&r, HALF_TOPIC)), op_draft])
            }
            _ => self.store.put_now(&op_draft).map(|r| vec![r]),
        };
        let results = put.map_err(|e| (response_code::SYSTEM_ERROR, e.to_string()))?;
        let last = results.last().map(AppendResult::next_offset);
        if let Some(op_result) = results.last() {
            st.next_op_offset = op_result.queue_offset + 1;
        }
        st.pending.remove(&info.identity);
        st.ended.insert(info.identity, outcome);
        Ok(last.filter(|_| outcome == Outcome::Commit))
    }
}

/// `checkPrepareMessage`: the half message is the producer group's, at the queue offset the
/// producer was told.
fn check_prepare_message(
    header: &EndTransactionRequestHeader,
    info: &HalfInfo,
    queue_offset: i64,
) -> Result<(), (i32, String)> {
    if info.producer_group != header.producer_group {
        return Err((
            response_code::SYSTEM_ERROR,
            format!(
                "The producer group wrong: the half message at commit log offset {} is of \
                 producer group {}, not {}",
                header.commit_log_offset, info.producer_group, header.producer_group
            ),
        ));
    }
    if queue_offset != header.tran_state_table_offset {
        return Err((
            response_code::SYSTEM_ERROR,
            format!(
                "The transaction state table offset wrong: the half message at commit log \
                 offset {} has queue offset {queue_offset}, not {}",
                header.commit_log_offset, header.tran_state_table_offset
            ),
        ));
    }
    Ok(())
}
