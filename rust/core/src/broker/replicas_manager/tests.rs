//! The manager against a fake controller that keeps RocketMQ's controller rules for one
//! group: ids handed out in order and claimed with a check code, a master elected among the
//! live brokers with a new epoch each time, SyncStateSet changes only from the master of the
//! current epoch against the current set epoch.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::broker::controller::tests::wait_for;
use crate::protocol::json::{to_json, JsonStyle};
use crate::remoting::header::*;
use crate::remoting::{
    request_code, RemotingCommand, RemotingServer, RequestContext, RequestProcessor, ServerConfig,
};

#[derive(Default)]
struct Group {
    next_id: i64,
    /// id -> (address, check code)
    brokers: BTreeMap<i64, (String, String)>,
    dead: BTreeSet<i64>,
    master: Option<i64>,
    epoch: i32,
    set: SyncStateSet,
}

#[derive(Default)]
struct FakeController {
    group: Mutex<Group>,
    next_id_asked: AtomicUsize,
    heartbeats: AtomicUsize,
    /// Its own address, named as the leader.
    addr: Mutex<String>,
}

impl FakeController {
    fn master_info(&self, g: &Group, request: &RemotingCommand, code: i32) -> RemotingCommand {
        let mut r = RemotingCommand::response_to(request, code, None);
        r.write_custom_header(&MasterInfoResponseHeader {
            master_broker_id: g.master,
            master_address: g.master.map(|m| g.brokers[&m].0.clone()),
            master_epoch: Some(g.epoch),
            sync_state_set_epoch: Some(g.set.sync_state_set_epoch),
        });
        r.body = to_json(&g.set, JsonStyle::Fastjson).into_bytes();
        r
    }

    /// Elects the first live broker, preferring the SyncStateSet.
    fn elect(g: &mut Group) {
        let live = |id: &i64| !g.dead.contains(id);
        let from_set = g.set.sync_state_set.iter().copied().find(live);
        let Some(new) = from_set.or_else(|| g.brokers.keys().copied().find(live)) else {
            g.master = None;
            return;
        };
        g.master = Some(new);
        g.epoch += 1;
        g.set = SyncStateSet {
            sync_state_set: BTreeSet::from([new]),
            sync_state_set_epoch: g.set.sync_state_set_epoch + 1,
        };
    }
}

impl RequestProcessor for FakeController {
    fn process(&self, request: RemotingCommand, _ctx: &RequestContext) -> Option<RemotingCommand> {
        let mut g = self.group.lock().unwrap();
        let ok = |r: &RemotingCommand| RemotingCommand::response_to(r, 0, None);
        match request.code {
            request_code::CONTROLLER_GET_METADATA_INFO => {
                let mut r = ok(&request);
                r.write_custom_header(&GetMetaDataResponseHeader {
                    controller_leader_address: Some(self.addr.lock().unwrap().clone()),
                    is_leader: true,
                    ..Default::default()
                });
                Some(r)
            }
            request_code::CONTROLLER_GET_NEXT_BROKER_ID => {
                self.next_id_asked.fetch_add(1, Ordering::SeqCst);
                let mut r = ok(&request);
                r.write_custom_header(&GetNextBrokerIdResponseHeader {
                    cluster_name: None,
                    broker_name: None,
                    next_broker_id: Some(g.next_id + 1),
                });
                Some(r)
            }
            request_code::CONTROLLER_APPLY_BROKER_ID => {
                let h: ApplyBrokerIdRequestHeader = request.decode_custom_header().unwrap();
                let id = h.applied_broker_id;
                match g.brokers.get(&id) {
                    Some((_, code)) if *code != h.register_check_code => Some(
                        RemotingCommand::response_to(&request, 2014, Some("taken".into())),
                    ),
                    _ => {
                        g.brokers.insert(id, (String::new(), h.register_check_code));
                        g.next_id = g.next_id.max(id);
                        Some(ok(&request))
                    }
                }
            }
            request_code::CONTROLLER_REGISTER_BROKER => {
                let h: RegisterBrokerToControllerRequestHeader =
                    request.decode_custom_header().unwrap();
                let Some(entry) = g.brokers.get_mut(&h.broker_id) else {
                    return Some(RemotingCommand::response_to(
                        &request,
                        2005,
                        Some("unknown id".into()),
                    ));
                };
                entry.0 = h.broker_address;
                g.dead.remove(&h.broker_id);
                Some(self.master_info(&g, &request, 0))
            }
            request_code::CONTROLLER_ELECT_MASTER => {
                let still = g.master.filter(|m| !g.dead.contains(m)).is_some();
                if !still {
                    Self::elect(&mut g);
                }
                let code = if still {
                    response_code::CONTROLLER_MASTER_STILL_EXIST
                } else {
                    0
                };
                Some(self.master_info(&g, &request, code))
            }
            request_code::CONTROLLER_GET_REPLICA_INFO => Some(self.master_info(&g, &request, 0)),
            request_code::CONTROLLER_ALTER_SYNC_STATE_SET => {
                let h: AlterSyncStateSetRequestHeader = request.decode_custom_header().unwrap();
                let proposed: SyncStateSet =
                    crate::protocol::json::parse_lenient(&request.body, "SyncStateSet").unwrap();
                if Some(h.master_broker_id) != g.master
                    || h.master_epoch != g.epoch
                    || proposed.sync_state_set_epoch != g.set.sync_state_set_epoch
                {
                    return Some(RemotingCommand::response_to(
                        &request,
                        2001,
                        Some("fenced".into()),
                    ));
                }
                g.set = SyncStateSet {
                    sync_state_set: proposed.sync_state_set,
                    sync_state_set_epoch: g.set.sync_state_set_epoch + 1,
                };
                let mut r = ok(&request);
                r.body = to_json(&g.set, JsonStyle::Fastjson).into_bytes();
                Some(r)
            }
            request_code::BROKER_HEARTBEAT => {
                let h: BrokerHeartbeatRequestHeader = request.decode_custom_header().unwrap();
                assert!(h.broker_id.is_some() && h.epoch.is_some());
                self.heartbeats.fetch_add(1, Ordering::SeqCst);
                None
            }
            other => panic!("unexpected request {other}"),
        }
    }
}

/// What the broker was told, in order.
#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

impl RoleListener for Recorder {
    fn change_to_master(&self, epoch: i32, set: &SyncStateSet) {
        self.0
            .lock()
            .unwrap()
            .push(format!("master {epoch} {:?}", set.sync_state_set));
    }
    fn change_to_slave(&self, master_addr: &str, master_id: i64, epoch: i32) {
        self.0
            .lock()
            .unwrap()
            .push(format!("slave of {master_id} {master_addr} {epoch}"));
    }
    fn sync_state_set_changed(&self, set: &SyncStateSet) {
        self.0
            .lock()
            .unwrap()
            .push(format!("set {:?}", set.sync_state_set));
    }
    fn offsets(&self) -> (i32, u64, u64) {
        (1, 100, 100)
    }
}

struct Fixture {
    controller: Arc<FakeController>,
    _server: RemotingServer,
    addr: String,
    dir: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let controller = Arc::new(FakeController::default());
    let server = RemotingServer::start(
        "127.0.0.1:0".parse().unwrap(),
        controller.clone(),
        ServerConfig::default(),
    )
    .unwrap();
    let addr = server.local_addr().to_string();
    *controller.addr.lock().unwrap() = addr.clone();
    Fixture {
        addr,
        controller,
        _server: server,
        dir: tempfile::tempdir().unwrap(),
    }
}

impl Fixture {
    fn broker(&self, name: &str) -> (Arc<ReplicasManager>, Arc<Recorder>) {
        self.broker_polling(name, Duration::from_millis(50))
    }

    /// A broker that reads the replica info every `period` (`syncBrokerMetadataPeriod`).
    fn broker_polling(
        &self,
        name: &str,
        period: Duration,
    ) -> (Arc<ReplicasManager>, Arc<Recorder>) {
        let recorder = Arc::new(Recorder::default());
        let config = ReplicasConfig {
            identity: BrokerIdentity {
                cluster_name: "DefaultCluster".into(),
                broker_name: "broker-a".into(),
                broker_addr: format!("127.0.0.1:{name}"),
            },
            identity_path: self.dir.path().join(name).join("brokerIdentity"),
            heartbeat_interval: Duration::from_millis(20),
            controller_heartbeat_timeout: Duration::from_secs(10),
            sync_broker_metadata_period: period,
            sync_controller_metadata_period: Duration::from_secs(10),
            election_priority: i32::MAX,
        };
        let api = ControllerApi::new(vec![self.addr.clone()], None).unwrap();
        let manager = Arc::new(ReplicasManager::new(
            api,
            config,
            recorder.clone(),
            Arc::default(),
        ));
        (manager, recorder)
    }

    fn started(&self, name: &str) -> (Arc<ReplicasManager>, Arc<Recorder>) {
        self.started_polling(name, Duration::from_millis(50))
    }

    fn started_polling(
        &self,
        name: &str,
        period: Duration,
    ) -> (Arc<ReplicasManager>, Arc<Recorder>) {
        let (manager, recorder) = self.broker_polling(name, period);
        manager.start().unwrap();
        wait_for("the manager to run", || {
            manager.state().running.then_some(())
        });
        (manager, recorder)
    }
}

fn told(recorder: &Recorder) -> Vec<String> {
    recorder.0.lock().unwrap().clone()
}

#[test]
fn the_first_broker_is_elected_and_the_second_follows_it() {
    let f = fixture();
    let (a, told_a) = f.started("10911");
    assert_eq!(told(&told_a), vec!["master 1 {1}"]);
    let state = a.state();
    assert_eq!(
        (state.broker_id, state.master_broker_id, state.master_epoch),
        (Some(1), Some(1), 1)
    );
    let (b, told_b) = f.started("10921");
    assert_eq!(told(&told_b), vec!["slave of 1 127.0.0.1:10911 1"]);
    assert_eq!(b.state().broker_id, Some(2));
    // The identity files, in RocketMQ's format; the claims are gone.
    let identity = std::fs::read_to_string(f.dir.path().join("10921/brokerIdentity")).unwrap();
    assert_eq!(identity, "DefaultCluster#broker-a#2");
    assert!(!f.dir.path().join("10921/brokerIdentity-temp").exists());
    wait_for("heartbeats", || {
        (f.controller.heartbeats.load(Ordering::SeqCst) >= 4).then_some(())
    });
    a.shutdown();
    b.shutdown();
}

#[test]
fn a_failover_makes_the_slave_master_and_the_old_master_rejoins_as_slave() {
    let f = fixture();
    let (a, told_a) = f.started("10911");
    let (b, told_b) = f.started("10921");
    // The master proposes the slave into its SyncStateSet.
    let set = a.alter_sync_state_set(BTreeSet::from([1, 2])).unwrap();
    assert_eq!(
        (set.sync_state_set, set.sync_state_set_epoch),
        (BTreeSet::from([1, 2]), 2)
    );
    // A dies; the controller elects B from the SyncStateSet; B learns it at its next sync.
    a.shutdown();
    {
        let mut g = f.controller.group.lock().unwrap();
        g.dead.insert(1);
        FakeController::elect(&mut g);
    }
    wait_for("B to become master", || b.state().is_master().then_some(()));
    assert_eq!(
        told(&told_b),
        vec!["slave of 1 127.0.0.1:10911 1", "master 2 {2}"]
    );
    // A restarts with its identity: no new id, and it follows B.
    let asked = f.controller.next_id_asked.load(Ordering::SeqCst);
    let (a, told_a2) = f.started("10911");
    assert_eq!(f.controller.next_id_asked.load(Ordering::SeqCst), asked);
    assert_eq!(a.state().broker_id, Some(1));
    assert_eq!(told(&told_a2), vec!["slave of 2 127.0.0.1:10921 2"]);
    assert_eq!(told(&told_a), vec!["master 1 {1}"]);
    a.shutdown();
    b.shutdown();
}

#[test]
fn a_claim_left_by_a_crash_is_claimed_again_with_its_check_code() {
    let f = fixture();
    let path = f.dir.path().join("10911/brokerIdentity");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    // Killed after APPLY_BROKER_ID reached the controller, before the identity file was written.
    f.controller
        .group
        .lock()
        .unwrap()
        .brokers
        .insert(1, (String::new(), "127.0.0.1:10911;5".into()));
    f.controller.group.lock().unwrap().next_id = 1;
    std::fs::write(
        metadata::temp_path(&path),
        "DefaultCluster#broker-a#1#127.0.0.1:10911;5",
    )
    .unwrap();
    let (a, _) = f.started("10911");
    assert_eq!(a.state().broker_id, Some(1));
    assert_eq!(f.controller.next_id_asked.load(Ordering::SeqCst), 0);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "DefaultCluster#broker-a#1"
    );
    a.shutdown();
}

#[test]
fn a_store_of_another_group_is_refused_by_name() {
    let f = fixture();
    let path = f.dir.path().join("10911/brokerIdentity");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "OtherCluster#broker-b#3").unwrap();
    let (a, told_a) = f.broker("10911");
    let events = Arc::new(ServerEvents::default());
    let a = Arc::new(ReplicasManager {
        events: events.clone(),
        ..Arc::try_unwrap(a).ok().unwrap()
    });
    a.start().unwrap();
    let refused = wait_for("the refusal", || {
        events
            .drain(Duration::from_millis(50))
            .into_iter()
            .find(|e| e.problem)
    });
    assert!(
        refused
            .reason
            .contains("brokerClusterName=OtherCluster brokerName=broker-b"),
        "{}",
        refused.reason
    );
    assert!(
        refused.reason.contains("belongs to another broker group"),
        "{}",
        refused.reason
    );
    assert!(!a.state().running && told(&told_a).is_empty());
    assert!(f.controller.group.lock().unwrap().brokers.is_empty());
    a.shutdown();
    std::fs::write(&path, "DefaultCluster#broker-a").unwrap();
    let err = BrokerMetadata::read(&path, false).unwrap_err().to_string();
    assert!(err.contains("is not cluster#name#id"), "{err}");
}

/// The controller's NOTIFY_BROKER_ROLE_CHANGED as RocketMQ 5.4.0 sends it: oneway, the master
/// in the header, the new SyncStateSet in the body.
fn notification(g: &Group) -> RemotingCommand {
    let mut request = RemotingCommand::request(request_code::NOTIFY_BROKER_ROLE_CHANGED, 0);
    request.mark_oneway();
    let info = FakeController::default().master_info(g, &request, 0);
    request.ext_fields = info.ext_fields;
    request.body = info.body;
    request
}

#[test]
fn the_controllers_notification_changes_roles_without_waiting_for_the_poll() {
    let f = fixture();
    // Polls an hour apart: whatever changes below, the notification changed.
    let hour = Duration::from_secs(3600);
    let (a, told_a) = f.started_polling("10911", hour);
    let (b, told_b) = f.started_polling("10921", hour);
    let (stale, elected) = {
        let mut g = f.controller.group.lock().unwrap();
        let stale = notification(&g);
        g.dead.insert(1);
        FakeController::elect(&mut g);
        (stale, notification(&g))
    };
    b.notify_broker_role_changed(&elected, "controller");
    a.notify_broker_role_changed(&elected, "controller");
    assert_eq!(
        told(&told_b),
        vec!["slave of 1 127.0.0.1:10911 1", "master 2 {2}"]
    );
    assert_eq!(
        told(&told_a),
        vec!["master 1 {1}", "slave of 2 127.0.0.1:10921 2"]
    );
    // A late notification of the older epoch, and a repeat, change nothing.
    b.notify_broker_role_changed(&stale, "controller");
    b.notify_broker_role_changed(&elected, "controller");
    assert_eq!(told(&told_b).len(), 2);
    assert!(b.state().is_master() && !a.state().is_master());
    a.shutdown();
    b.shutdown();
}

#[test]
fn a_malformed_notification_is_reported_and_changes_nothing() {
    let f = fixture();
    let (a, told_a) = f.broker_polling("10911", Duration::from_secs(3600));
    let events = Arc::new(ServerEvents::default());
    let a = Arc::new(ReplicasManager {
        events: events.clone(),
        ..Arc::try_unwrap(a).ok().unwrap()
    });
    let mut no_epoch = RemotingCommand::request(request_code::NOTIFY_BROKER_ROLE_CHANGED, 0);
    no_epoch.write_custom_header(&MasterInfoResponseHeader {
        master_broker_id: Some(1),
        master_address: Some("127.0.0.1:10911".into()),
        ..Default::default()
    });
    let mut garbage = notification(&f.controller.group.lock().unwrap());
    garbage.body = b"{not json".to_vec();
    a.notify_broker_role_changed(&no_epoch, "10.0.0.9:5000");
    a.notify_broker_role_changed(&garbage, "10.0.0.9:5000");
    let reasons: Vec<String> = events
        .drain(Duration::from_millis(50))
        .into_iter()
        .filter(|e| e.problem)
        .map(|e| e.reason)
        .collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons[0].contains("from 10.0.0.9:5000") && reasons[0].contains("without masterEpoch"),
        "{reasons:?}"
    );
    assert!(reasons[1].contains("a malformed body"), "{reasons:?}");
    assert!(told(&told_a).is_empty() && a.state().master_epoch == 0);
}

#[test]
fn a_silent_or_dead_controller_node_does_not_hide_the_leader() {
    let f = fixture();
    // Accepts (the backlog does) but never answers; the other is not listening at all.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let nodes = vec![
        silent.local_addr().unwrap().to_string(),
        dead.to_string(),
        f.addr.clone(),
    ];
    let api = ControllerApi::new(nodes, None).unwrap();
    assert_eq!(api.find_leader().unwrap(), f.addr);
    assert_eq!(api.available(), vec![f.addr.clone()]);
    api.shutdown();
}
