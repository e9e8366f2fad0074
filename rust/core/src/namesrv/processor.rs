//! RocketMQ's `DefaultRequestProcessor` (with `ClientRequestProcessor`'s GET_ROUTEINFO_BY_TOPIC):
//! the name server's answers over the remoting server, on the route table behind one lock.
//!
//! Served: REGISTER_BROKER, UNREGISTER_BROKER, GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO,
//! GET_ALL_TOPIC_LIST_FROM_NAMESERVER, QUERY_DATA_VERSION, the KV config's and the write
//! permission's requests, and DELETE_TOPIC_IN_NAMESRV ([`DefaultRequestProcessor::CODES`], registered
//! by the [`NameServer`](super::NameServer)); anything else is REQUEST_CODE_NOT_SUPPORTED. Brokers leave the routes
//! when they unregister, when the connection they registered over closes (`onChannelDestroy`),
//! and when they stay silent past their heartbeat timeout: [`DefaultRequestProcessor::run_housekeeping`]
//! sleeps until exactly the next broker would expire, woken early by registrations and shutdown.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::kv_config::KvConfigManager;
use super::registered_topics::RegisteredBody;
use super::route_info::{BrokerAddrInfo, RegisterBrokerResult, RouteInfoManager};
use crate::protocol::body::{BodyError, DataVersion};
use crate::protocol::json::{parse_lenient, to_json, JsonStyle};
use crate::protocol::now_millis;
use crate::remoting::codes::{request_code, response_code};
use crate::remoting::header::{
    DeleteTopicFromNamesrvRequestHeader, GetRouteInfoRequestHeader, QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader, RegisterBrokerRequestHeader, RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
};
use crate::remoting::{
    not_supported, HeaderError, RemotingCommand, RequestContext, RequestProcessor, ServerEventKind,
    ServerEvents,
};
use crate::sync::{deadline_after, lock, ServiceThread, ServiceWaiter, Woke};

/// `FAQUrl.suggestTodo(FAQUrl.APPLY_TOPIC_URL)`, the tail of TOPIC_NOT_EXIST's remark.
const APPLY_TOPIC_TIP: &str =
    "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.";

/// Why a request failed; answered as SYSTEM_ERROR with this text, as Netty's handler answers a
/// `RemotingCommandException`.
#[derive(Debug, thiserror::Error)]
enum RequestError {
    #[error(transparent)]
    Header(#[from] HeaderError),
    #[error(transparent)]
    Body(#[from] BodyError),
}

/// The route table and what the processor keeps beside it, under one lock: requests (loop
/// thread) and expiry (housekeeping thread) both change it.
struct Routes {
    table: RouteInfoManager,
    /// The connection each live broker registered over (`BrokerLiveInfo.channel`).
    channels: HashMap<BrokerAddrInfo, u64>,
}

pub(crate) struct DefaultRequestProcessor {
    routes: Mutex<Routes>,
    /// The housekeeping thread, woken by a registration: it may bring the next expiry forward.
    housekeeping: ServiceThread,
    events: Arc<ServerEvents>,
    /// The heartbeat timeout of a broker whose register request names none.
    broker_channel_expired_time_ms: i64,
    kv: KvConfigManager,
}

impl DefaultRequestProcessor {
    /// The codes it answers (GET_ROUTEINFO_BY_TOPIC is RocketMQ's `ClientRequestProcessor`,
    /// over the same route table).
    pub(crate) const CODES: &'static [i32] = &[
        request_code::REGISTER_BROKER,
        request_code::UNREGISTER_BROKER,
        request_code::GET_ROUTEINFO_BY_TOPIC,
        request_code::GET_BROKER_CLUSTER_INFO,
        request_code::QUERY_DATA_VERSION,
        request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        request_code::PUT_KV_CONFIG,
        request_code::GET_KV_CONFIG,
        request_code::DELETE_KV_CONFIG,
        request_code::GET_KVLIST_BY_NAMESPACE,
        request_code::WIPE_WRITE_PERM_OF_BROKER,
        request_code::ADD_WRITE_PERM_OF_BROKER,
        request_code::DELETE_TOPIC_IN_NAMESRV,
    ];

    pub(crate) fn new(
        support_acting_master: bool,
        broker_channel_expired_time: Duration,
        kv: KvConfigManager,
        events: Arc<ServerEvents>,
    ) -> Self {
        Self {
            routes: Mutex::new(Routes {
                table: RouteInfoManager::new(support_acting_master),
                channels: HashMap::new(),
            }),
            housekeeping: ServiceThread::new("namesrv-housekeeping"),
            events,
            broker_channel_expired_time_ms: i64::try_from(broker_channel_expired_time.as_millis())
                .unwrap_or(i64::MAX),
            kv,
        }
    }

    /// Starts `scanNotActiveBroker` on its own thread, until [`DefaultRequestProcessor::stop`].
    pub(crate) fn start_housekeeping(self: &Arc<Self>) -> std::io::Result<()> {
        let worker = self.clone();
        self.housekeeping
            .start(move |waiter| worker.run_housekeeping(&waiter))
    }

    /// Sleeps until the next broker's heartbeat runs out, then drops whoever is silent.
    fn run_housekeeping(&self, waiter: &ServiceWaiter) {
        loop {
            // A broker may announce any heartbeat timeout, i64::MAX included. A registration
            // after this look wakes the wait below.
            let deadline = lock(&self.routes).table.next_expiry_ms().and_then(|at| {
                let wait = u64::try_from(at.saturating_sub(now_millis())).unwrap_or(0);
                deadline_after(Duration::from_millis(wait))
            });
            if waiter.wait_for_running(deadline) == Woke::Stopped {
                break;
            }
            let mut routes = lock(&self.routes);
            for info in routes.table.scan_not_active_broker(now_millis()) {
                routes.channels.remove(&info);
                self.events.push(
                    info.broker_addr,
                    ServerEventKind::Processor("EXPIRED"),
                    format!(
                        "broker of cluster {} sent no heartbeat within its timeout: removed from the routes",
                        info.cluster_name
                    ),
                    true,
                );
            }
        }
    }

    /// Ends the housekeeping thread and waits for it.
    pub(crate) fn stop(&self) {
        self.housekeeping.shutdown();
    }

    fn handle(
        &self,
        request: &RemotingCommand,
        ctx: &RequestContext,
    ) -> Result<RemotingCommand, RequestError> {
        match request.code {
            request_code::REGISTER_BROKER => self.register_broker(request, ctx),
            request_code::UNREGISTER_BROKER => self.unregister_broker(request),
            request_code::GET_ROUTEINFO_BY_TOPIC => self.get_route_info_by_topic(request),
            request_code::GET_BROKER_CLUSTER_INFO => {
                let mut response =
                    RemotingCommand::response_to(request, response_code::SUCCESS, None);
                response.body = lock(&self.routes).table.get_all_cluster_info().encode();
                Ok(response)
            }
            request_code::QUERY_DATA_VERSION => self.query_broker_topic_config(request),
            // `mqadmin topicList` (RocketMQ's `enableAllTopicList` is on by default).
            request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => {
                let mut response =
                    RemotingCommand::response_to(request, response_code::SUCCESS, None);
                response.body = lock(&self.routes).table.get_all_topic_list();
                Ok(response)
            }
            request_code::PUT_KV_CONFIG
            | request_code::GET_KV_CONFIG
            | request_code::DELETE_KV_CONFIG
            | request_code::GET_KVLIST_BY_NAMESPACE => Ok(self.kv_config(request)),
            // `mqadmin wipeWritePerm` / `addWritePerm`: drain a broker of sends, and undo it.
            request_code::WIPE_WRITE_PERM_OF_BROKER | request_code::ADD_WRITE_PERM_OF_BROKER => {
                Ok(self.operate_write_perm(request))
            }
            // `mqadmin deleteTopic`, after the brokers deleted it.
            request_code::DELETE_TOPIC_IN_NAMESRV => {
                let header: DeleteTopicFromNamesrvRequestHeader = request.decode_custom_header()?;
                lock(&self.routes)
                    .table
                    .delete_topic(&header.topic, header.cluster_name.as_deref());
                Ok(RemotingCommand::response_to(
                    request,
                    response_code::SUCCESS,
                    None,
                ))
            }
            // Only CODES are routed here.
            _ => Ok(not_supported(request)),
        }
    }

    /// The KV config's requests; a missing field is named, as RocketMQ's header check does.
    fn kv_config(&self, request: &RemotingCommand) -> RemotingCommand {
        let field = |name: &str| request.ext_fields.get(name).map(String::as_str);
        let answer =
            |code, remark: Option<String>| RemotingCommand::response_to(request, code, remark);
        let Some(namespace) = field("namespace") else {
            return answer(
                response_code::SYSTEM_ERROR,
                Some("`namespace` is missing".into()),
            );
        };
        if request.code == request_code::GET_KVLIST_BY_NAMESPACE {
            return match self.kv.list(namespace) {
                Some(table) => {
                    let mut response = answer(response_code::SUCCESS, None);
                    response.body = serde_json::json!({ "table": table })
                        .to_string()
                        .into_bytes();
                    response
                }
                None => answer(
                    response_code::QUERY_NOT_FOUND,
                    Some(format!("No config item, Namespace: {namespace}")),
                ),
            };
        }
        let Some(key) = field("key") else {
            return answer(response_code::SYSTEM_ERROR, Some("`key` is missing".into()));
        };
        let written = match request.code {
            request_code::PUT_KV_CONFIG => match field("value") {
                Some(value) => self.kv.put(namespace, key, value),
                None => {
                    return answer(
                        response_code::SYSTEM_ERROR,
                        Some("`value` is missing".into()),
                    )
                }
            },
            request_code::DELETE_KV_CONFIG => self.kv.delete(namespace, key),
            _ => {
                return match self.kv.get(namespace, key) {
                    Some(value) => {
                        let mut response = answer(response_code::SUCCESS, None);
                        response.ext_fields.insert("value".into(), value);
                        response
                    }
                    None => answer(
                        response_code::QUERY_NOT_FOUND,
                        Some(format!("No config item, Namespace: {namespace} Key: {key}")),
                    ),
                }
            }
        };
        match written {
            Ok(()) => answer(response_code::SUCCESS, None),
            Err(e) => answer(
                response_code::SYSTEM_ERROR,
                Some(format!("KV config not saved: {e}")),
            ),
        }
    }

    fn operate_write_perm(&self, request: &RemotingCommand) -> RemotingCommand {
        let Some(broker_name) = request.ext_fields.get("brokerName") else {
            return RemotingCommand::response_to(
                request,
                response_code::SYSTEM_ERROR,
                Some("`brokerName` is missing".into()),
            );
        };
        let wipe = request.code == request_code::WIPE_WRITE_PERM_OF_BROKER;
        let count = lock(&self.routes)
            .table
            .operate_write_perm_of_broker(broker_name, wipe);
        let mut response = RemotingCommand::response_to(request, response_code::SUCCESS, None);
        let field = if wipe {
            "wipeTopicCount"
        } else {
            "addTopicCount"
        };
        response.ext_fields.insert(field.into(), count.to_string());
        response
    }

    fn register_broker(
        &self,
        request: &RemotingCommand,
        ctx: &RequestContext,
    ) -> Result<RemotingCommand, RequestError> {
        let mut header: RegisterBrokerRequestHeader = request.decode_custom_header()?;
        if !header.body_crc_matches(&request.body) {
            log::warn!("register broker from {}: crc32 not match", ctx.remote());
            return Ok(RemotingCommand::response_to(
                request,
                response_code::SYSTEM_ERROR,
                Some("crc32 not match".into()),
            ));
        }
        // Java registers an empty body as no topics at data version zero.
        let body = if request.body.is_empty() {
            RegisteredBody::default()
        } else {
            RegisteredBody::decode(&request.body, header.compressed, request.version)?
        };
        header
            .heartbeat_timeout_millis
            .get_or_insert(self.broker_channel_expired_time_ms);
        // Brokers before 3.0.11 send no filter server list.
        let filter_servers = (request.version >= crate::protocol::body::mq_version::V3_0_11)
            .then_some(body.filter_server_list.as_slice());
        let (result, newly_live) = self.register_in_table(&header, &body, filter_servers, ctx);
        let Some(result) = result else {
            return Ok(RemotingCommand::response_to(
                request,
                response_code::SYSTEM_ERROR,
                Some("register broker failed".into()),
            ));
        };
        if newly_live {
            self.report_registered(&header, ctx);
        }
        let mut response = RemotingCommand::response_to(request, response_code::SUCCESS, None);
        response.write_custom_header(&RegisterBrokerResponseHeader {
            ha_server_addr: result.ha_server_addr,
            master_addr: result.master_addr,
        });
        // Java answers with the order topic configs of its KV store (none here: rocketha keeps
        // no KV config), and a null body when there are none, which brokers accept.
        Ok(response)
    }

    /// `RouteInfoManager.registerBroker` under the routes' lock, with the broker's connection
    /// tracked while it is live. Also says whether the broker became live with this call.
    fn register_in_table(
        &self,
        header: &RegisterBrokerRequestHeader,
        body: &RegisteredBody,
        filter_servers: Option<&[String]>,
        ctx: &RequestContext,
    ) -> (Option<RegisterBrokerResult>, bool) {
        let info = BrokerAddrInfo {
            cluster_name: header.cluster_name.clone(),
            broker_addr: header.broker_addr.clone(),
        };
        let mut routes = lock(&self.routes);
        let first = routes
            .table
            .broker_live_info(&info.cluster_name, &info.broker_addr)
            .is_none();
        let result =
            routes
                .table
                .register_broker(header, Some(&body.topics), filter_servers, now_millis());
        let live = routes
            .table
            .broker_live_info(&info.cluster_name, &info.broker_addr)
            .is_some();
        if live {
            routes.channels.insert(info.clone(), ctx.connection_id());
            self.housekeeping.wakeup();
        } else {
            routes.channels.remove(&info);
        }
        (result, first && live)
    }

    /// The REGISTERED event: a broker the table did not have is live.
    fn report_registered(&self, header: &RegisterBrokerRequestHeader, ctx: &RequestContext) {
        self.events.push(
            header.broker_addr.clone(),
            ServerEventKind::Processor("REGISTERED"),
            format!(
                "{}[{}] of cluster {} registered from {}, HA address {:?}",
                header.broker_name,
                header.broker_id,
                header.cluster_name,
                ctx.remote(),
                header.ha_server_addr
            ),
            false,
        );
    }

    fn unregister_broker(
        &self,
        request: &RemotingCommand,
    ) -> Result<RemotingCommand, RequestError> {
        let header: UnRegisterBrokerRequestHeader = request.decode_custom_header()?;
        let info = BrokerAddrInfo {
            cluster_name: header.cluster_name.clone(),
            broker_addr: header.broker_addr.clone(),
        };
        {
            let mut routes = lock(&self.routes);
            routes
                .table
                .unregister_broker(std::slice::from_ref(&header));
            routes.channels.remove(&info);
        }
        self.events.push(
            header.broker_addr,
            ServerEventKind::Processor("UNREGISTERED"),
            format!(
                "{}[{}] of cluster {} unregistered",
                header.broker_name, header.broker_id, header.cluster_name
            ),
            false,
        );
        Ok(RemotingCommand::response_to(
            request,
            response_code::SUCCESS,
            None,
        ))
    }

    fn get_route_info_by_topic(
        &self,
        request: &RemotingCommand,
    ) -> Result<RemotingCommand, RequestError> {
        let header: GetRouteInfoRequestHeader = request.decode_custom_header()?;
        let route = lock(&self.routes)
            .table
            .pickup_topic_route_data(&header.topic);
        let Some(route) = route else {
            return Ok(RemotingCommand::response_to(
                request,
                response_code::TOPIC_NOT_EXIST,
                Some(format!(
                    "No topic route info in name server for the topic: {}{APPLY_TOPIC_TIP}",
                    header.topic
                )),
            ));
        };
        let mut response = RemotingCommand::response_to(request, response_code::SUCCESS, None);
        response.body = route.encode_for(
            request.version,
            header.accept_standard_json_only.unwrap_or(false),
        );
        Ok(response)
    }

    fn query_broker_topic_config(
        &self,
        request: &RemotingCommand,
    ) -> Result<RemotingCommand, RequestError> {
        let header: QueryDataVersionRequestHeader = request.decode_custom_header()?;
        let data_version: DataVersion =
            parse_lenient(&request.body, "DataVersion").map_err(BodyError::from)?;
        let (changed, current) = {
            let mut routes = lock(&self.routes);
            let table = &mut routes.table;
            let changed = table.is_broker_topic_config_changed(
                &header.cluster_name,
                &header.broker_addr,
                &data_version,
            );
            // The query counts as a heartbeat.
            table.update_broker_info_update_timestamp(
                &header.cluster_name,
                &header.broker_addr,
                now_millis(),
            );
            let current = table
                .query_broker_topic_config(&header.cluster_name, &header.broker_addr)
                .cloned();
            (changed, current)
        };
        let mut response = RemotingCommand::response_to(request, response_code::SUCCESS, None);
        if let Some(current) = current {
            response.body = to_json(&current, JsonStyle::Fastjson).into_bytes();
        }
        response.write_custom_header(&QueryDataVersionResponseHeader { changed });
        Ok(response)
    }
}

impl RequestProcessor for DefaultRequestProcessor {
    fn process(&self, request: RemotingCommand, ctx: &RequestContext) -> Option<RemotingCommand> {
        Some(self.handle(&request, ctx).unwrap_or_else(|e| {
            log::warn!(
                "{}: request code {} failed: {e}",
                ctx.remote(),
                request.code
            );
            RemotingCommand::response_to(&request, response_code::SYSTEM_ERROR, Some(e.to_string()))
        }))
    }

    /// `BrokerHousekeepingService.onChannelClose`: the brokers that registered over this
    /// connection are gone.
    fn on_close(&self, connection_id: u64, remote: SocketAddr) {
        let mut routes = lock(&self.routes);
        let gone: Vec<BrokerAddrInfo> = routes
            .channels
            .iter()
            .filter(|(_, &id)| id == connection_id)
            .map(|(info, _)| info.clone())
            .collect();
        for info in gone {
            routes.channels.remove(&info);
            routes.table.on_channel_destroy(&info);
            self.events.push(
                info.broker_addr,
                ServerEventKind::Processor("UNREGISTERED"),
                format!(
                    "its connection from {remote} closed (onChannelDestroy): removed from the routes of cluster {}",
                    info.cluster_name
                ),
                false,
            );
        }
    }
}
