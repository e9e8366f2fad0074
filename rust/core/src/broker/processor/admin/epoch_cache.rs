//! GET_BROKER_EPOCH_CACHE (`mqadmin getBrokerEpoch`): a broker in controller mode lists the
//! epochs of its log (`EpochEntryCache`), the last one open up to its max offset.

use serde::Serialize;

use crate::broker::BrokerSettings;
use crate::ha::epoch::EpochFileCache;
use crate::protocol::json::{to_json, JsonStyle};
use crate::remoting::{response_code, RemotingCommand};

/// RocketMQ's `EpochEntry`: an epoch's first offset and the first offset past it
/// (`Long.MAX_VALUE` for the open one).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EpochEntryBody {
    end_offset: i64,
    epoch: i32,
    start_offset: i64,
}

/// `EpochEntryCache`, its properties in fastjson's (alphabetical) order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EpochEntryCache<'a> {
    broker_id: i64,
    broker_name: &'a str,
    cluster_name: &'a str,
    epoch_list: Vec<EpochEntryBody>,
    max_offset: i64,
}

fn long(offset: u64) -> i64 {
    i64::try_from(offset).unwrap_or(i64::MAX)
}

/// The answer for this broker; `epochs` is `None` outside controller mode, which RocketMQ
/// refuses the same way.
pub(crate) fn get_broker_epoch_cache(
    settings: &BrokerSettings,
    epochs: Option<&EpochFileCache>,
    max_offset: u64,
    request: &RemotingCommand,
) -> RemotingCommand {
    let Some(epochs) = epochs else {
        return RemotingCommand::response_to(
            request,
            response_code::SYSTEM_ERROR,
            Some("GET_BROKER_EPOCH_CACHE is for a broker in controller mode (enableControllerMode=true)".into()),
        );
    };
    let body = EpochEntryCache {
        broker_id: settings.broker_id,
        broker_name: &settings.broker_name,
        cluster_name: &settings.cluster_name,
        epoch_list: epochs
            .entries()
            .into_iter()
            .map(|e| EpochEntryBody {
                end_offset: long(e.end_offset),
                epoch: e.epoch,
                start_offset: long(e.start_offset),
            })
            .collect(),
        max_offset: long(max_offset),
    };
    let mut response = RemotingCommand::response_to(request, response_code::SUCCESS, None);
    response.body = to_json(&body, JsonStyle::Fastjson).into_bytes();
    response
}
