//! RocketMQ's `QueryMessageProcessor`: a message by its offset msg id (VIEW_MESSAGE_BY_ID) or
//! by key (QUERY_MESSAGE) through the index files. It runs on a worker of its own, as RocketMQ's
//! `queryMessageExecutor`: a query reads index files and records that may not be in memory.

use std::sync::Arc;

use super::answer::{success_with, system_error};
use crate::remoting::header::{
    QueryMessageRequestHeader, QueryMessageResponseHeader, ViewMessageRequestHeader,
};
use crate::remoting::{
    request_code, response_code, RemotingCommand, RequestContext, RequestProcessor,
};
use crate::store::{KeyQuery, MessageStore};

/// The codes it answers.
pub(crate) const CODES: &[i32] = &[
    request_code::QUERY_MESSAGE,
    request_code::VIEW_MESSAGE_BY_ID,
];

pub(crate) struct QueryMessageProcessor {
    pub(crate) store: Arc<MessageStore>,
}

impl RequestProcessor for QueryMessageProcessor {
    fn process(&self, request: RemotingCommand, _ctx: &RequestContext) -> Option<RemotingCommand> {
        Some(match request.code {
            request_code::QUERY_MESSAGE => query_message(&self.store, &request),
            _ => view_message_by_id(&self.store, &request),
        })
    }
}

/// VIEW_MESSAGE_BY_ID: the record at the commit log offset the offset msg id names
/// (`MessageDecoder.decodeMessageId`: store host, then that offset), raw.
fn view_message_by_id(store: &MessageStore, request: &RemotingCommand) -> RemotingCommand {
    let h: ViewMessageRequestHeader = match request.decode_custom_header() {
        Ok(h) => h,
        Err(e) => return system_error(request, e),
    };
    let found = u64::try_from(h.offset)
        .ok()
        .and_then(|o| store.record_at(o));
    match found {
        Some((raw, _)) => {
            let mut r = RemotingCommand::response_to(request, response_code::SUCCESS, None);
            r.body = raw;
            r
        }
        None => RemotingCommand::response_to(
            request,
            response_code::SYSTEM_ERROR,
            Some(format!(
                "can not find message by the offset, {} (offset: no record starts there; the \
                 commit log holds [{}, {}))",
                h.offset,
                store.min_offset(),
                store.max_offset()
            )),
        ),
    }
}

/// `MixAll.UNIQUE_MSG_QUERY_FLAG`: the key is a message's unique key (its client msg id).
const UNIQUE_MSG_QUERY_FLAG: &str = "_UNIQUE_KEY_QUERY";
/// `defaultQueryMaxNum`: how many a unique key query asks for, whatever the client says.
const DEFAULT_QUERY_MAX_NUM: i32 = 32;

/// QUERY_MESSAGE (RocketMQ's `QueryMessageProcessor.queryMessage`): the raw records indexed
/// under the key and stored in the range, oldest first, or QUERY_NOT_FOUND. Answered as the
/// index stands now: a message stored a moment ago may not be indexed yet, as in RocketMQ.
fn query_message(store: &MessageStore, request: &RemotingCommand) -> RemotingCommand {
    let mut h: QueryMessageRequestHeader = match request.decode_custom_header() {
        Ok(h) => h,
        Err(e) => return system_error(request, e),
    };
    let unique = request
        .ext_fields
        .get(UNIQUE_MSG_QUERY_FLAG)
        .is_some_and(|v| v == "true");
    if unique {
        h.max_num = DEFAULT_QUERY_MAX_NUM;
    }
    let not_found = |why: String| {
        RemotingCommand::response_to(request, response_code::QUERY_NOT_FOUND, Some(why))
    };
    if h.begin_timestamp > h.end_timestamp || h.max_num <= 0 {
        return not_found(format!(
            "can not find message, maybe time range not correct: beginTimestamp {} is after \
             endTimestamp {}, or maxNum {} is not positive",
            h.begin_timestamp, h.end_timestamp, h.max_num
        ));
    }
    let max = usize::try_from(h.max_num).unwrap_or_default();
    let query = KeyQuery {
        topic: &h.topic,
        key: &h.key,
        unique,
        max,
        begin: h.begin_timestamp,
        end: h.end_timestamp,
    };
    let (records, offsets) = match store.query_message(&query) {
        Ok(found) => found,
        Err(e) => {
            return RemotingCommand::response_to(
                request,
                response_code::SYSTEM_ERROR,
                Some(e.to_string()),
            )
        }
    };
    if records.is_empty() {
        return not_found(format!(
            "can not find message, maybe time range not correct: no message of topic {} with \
             {} {:?} stored in [{}, {}]",
            h.topic,
            if unique { "unique key" } else { "key" },
            h.key,
            h.begin_timestamp,
            h.end_timestamp
        ));
    }
    let mut r = success_with(
        request,
        &QueryMessageResponseHeader {
            index_last_update_timestamp: offsets.index_last_update_timestamp,
            index_last_update_phyoffset: offsets.index_last_update_phy_offset,
        },
    );
    r.body = records
        .iter()
        .flat_map(|rec| rec.bytes().to_vec())
        .collect();
    r
}
