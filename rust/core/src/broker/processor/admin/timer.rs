//! The timer store's state, as `mqadmin getTimerCheckPoint` / `getTimerMetrics` and a
//! slave's sync read it: GET_TIMER_CHECK_POINT (the checkpoint's 56 bytes) and
//! GET_TIMER_METRICS (the per-topic counts, in `timermetrics`' JSON).

use crate::broker::processor::answer::{system_error, with_body};
use crate::remoting::{request_code, RemotingCommand};
use crate::store::MessageStore;

pub(crate) fn answer(store: &MessageStore, request: &RemotingCommand) -> RemotingCommand {
    let Some(timer) = store.timer() else {
        // RocketMQ has no timer store then either, and answers so.
        return system_error(
            request,
            "the broker has no timer store (timerWheelEnable=false)",
        );
    };
    let body = if request.code == request_code::GET_TIMER_CHECK_POINT {
        timer.checkpoint().to_vec()
    } else {
        timer.metrics()
    };
    with_body(request, body)
}
