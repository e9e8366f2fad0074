use std::net::SocketAddr;

use super::*;

fn load(pairs: &[(&str, &str)]) -> Result<Loaded, ConfigError> {
    BrokerConfig::from_properties(pairs.iter().copied())
}

fn problem(pairs: &[(&str, &str)]) -> String {
    load(pairs).expect_err("must be refused").to_string()
}

#[test]
fn every_key_has_rocketmqs_default() {
    let c = BrokerConfig::default();
    let expected: &[(&str, &str)] = &[
        ("brokerClusterName", "DefaultCluster"),
        ("brokerName", "broker-a"),
        ("brokerId", "0"),
        ("brokerRole", "ASYNC_MASTER"),
        ("flushDiskType", "ASYNC_FLUSH"),
        ("mappedFileSizeCommitLog", "1073741824"),
        ("mappedFileSizeConsumeQueue", "6000000"),
        ("brokerIP1", "127.0.0.1"),
        ("listenPort", "10911"),
        ("listenAddress", "127.0.0.1"),
        ("remotingAllowInsecure", "false"),
        ("tls.server.mode", "disabled"),
        ("tls.server.need.client.auth", "none"),
        ("tls.enable", "false"),
        ("tls.test.mode.enable", "false"),
        ("aclEnable", "false"),
        ("registerNameServerPeriod", "30000"),
        ("autoCreateTopicEnable", "true"),
        ("defaultTopicQueueNums", "8"),
        ("brokerPermission", "6"),
        ("haListenPort", "10912"),
        ("haListenAddress", "127.0.0.1"),
        ("haSendHeartbeatInterval", "5000"),
        ("haHousekeepingInterval", "20000"),
        ("haTransferBatchSize", "32768"),
        ("slaveTimeout", "3000"),
        ("syncFlushTimeout", "5000"),
        ("haMaxGapNotInSync", "268435456"),
        ("haFlowControlEnable", "false"),
        ("maxHaTransferByteInSecond", "104857600"),
        ("syncFromLastFile", "false"),
        ("slaveReadEnable", "false"),
        ("accessMessageInMemoryMaxRatio", "40"),
        ("whichBrokerWhenConsumeSlowly", "1"),
        ("enablePropertyFilter", "false"),
        ("longPollingEnable", "true"),
        ("flushConsumerOffsetInterval", "5000"),
        ("autoCreateSubscriptionGroup", "true"),
        ("maxTransferBytesOnMessageInMemory", "262144"),
        ("maxTransferCountOnMessageInMemory", "32"),
        ("maxTransferBytesOnMessageInDisk", "65536"),
        ("maxTransferCountOnMessageInDisk", "8"),
        ("slaveSyncInterval", "60000"),
        ("flushIntervalCommitLog", "500"),
        ("maxMessageSize", "4194304"),
        ("haTransferCrc", "false"),
        ("haAcceptZeroBodyCrc", "false"),
        ("haAllowInsecure", "false"),
        ("metricsAddress", "127.0.0.1"),
        ("deleteWhen", "04"),
        ("fileReservedTime", "72"),
        ("diskMaxUsedSpaceRatio", "75"),
        ("diskSpaceCleanForciblyRatio", "85"),
        ("diskSpaceWarningLevelRatio", "90"),
        ("cleanResourceInterval", "10000"),
        ("deleteFileBatchMax", "10"),
        ("fileReservedTimeUnitMs", "3600000"),
        (
            "messageDelayLevel",
            "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
        ),
        ("flushDelayOffsetInterval", "10000"),
        ("timerWheelEnable", "true"),
        ("timerPrecisionMs", "1000"),
        ("timerMaxDelaySec", "259200"),
        ("timerRollWindowSlot", "172800"),
        ("timerFlushIntervalMs", "1000"),
        ("mappedFileSizeTimerLog", "104857600"),
        ("timerCongestNumEachSlot", "2147483647"),
        ("recallMessageEnable", "false"),
        ("reviveQueueNum", "8"),
        ("popFromRetryProbability", "20"),
        ("enableRetryTopicV2", "false"),
        ("popPollingSize", "1024"),
        ("retrieveMessageFromPopRetryTopicV1", "true"),
        ("popResponseReturnActualRetryTopic", "false"),
        ("clusterTopicEnable", "true"),
        ("brokerTopicEnable", "true"),
        ("messageIndexEnable", "true"),
        ("maxHashSlotNum", "5000000"),
        ("maxIndexNum", "20000000"),
        ("enableTopicMessageTypeCheck", "false"),
        ("enableMixedMessageType", "false"),
        ("rejectTransactionMessage", "false"),
        ("transactionTimeOut", "6000"),
        ("transactionCheckMax", "15"),
        ("transactionCheckInterval", "30000"),
        ("rebalanceLockMaxLiveTime", "60000"),
        ("compressedRegister", "false"),
        ("maxTopicQueueNums", "1024"),
        ("enableControllerMode", "false"),
        ("controllerAddr", ""),
        ("allAckInSyncStateSet", "false"),
        ("brokerHeartbeatInterval", "1000"),
        ("controllerHeartBeatTimeoutMills", "10000"),
        ("syncBrokerMetadataPeriod", "5000"),
        ("syncControllerMetadataPeriod", "10000"),
        ("brokerElectionPriority", "2147483647"),
        ("haMaxTimeSlaveNotCatchup", "15000"),
        ("tableTierInterval", "60000"),
        ("tableTierTailAge", "60000"),
        ("minInSyncReplicas", "1"),
    ];
    for (key, value) in expected {
        assert_eq!(c.get(key).as_deref(), Some(*value), "{key}");
    }
    let unset = [
        "tls.server.certPath",
        "tls.server.keyPath",
        "tls.server.keyPassword",
        "tls.server.trustCertPath",
        "tls.client.trustCertPath",
        "tls.client.certPath",
        "tls.client.keyPath",
        "tls.client.keyPassword",
        "aclPlainFile",
        "namesrvAddr",
        "haMasterAddress",
        "inSyncReplicas",
        "haAuthSecret",
        "haAuthSecretFile",
        "haAuthSecretEnv",
        "metricsPort",
        "storePathCommitLog",
        "tableTierTopics",
        "tableTierPath",
    ];
    for key in unset {
        assert_eq!(c.get(key), None, "{key}");
    }
    assert!(c.store_path_root_dir.ends_with("store"));
    // Every key is listed once, in one of the two tables above or the root directory.
    let counted = expected.len() + unset.len() + 1;
    assert_eq!(counted, BrokerConfig::KEYS.len());
    assert_eq!(BrokerConfig::KEYS.len(), BrokerConfig::FIELDS.len());
    assert_eq!(c.in_sync_replicas(), 1);
    c.validate().expect("the defaults are valid");
}

#[test]
fn every_key_is_set_from_its_text_and_written_back() {
    let mut c = BrokerConfig::default();
    // A value of each key's type that differs from its default and passes validation.
    for (i, key) in BrokerConfig::KEYS.iter().enumerate() {
        let before = c.get(key);
        let value = match *key {
            "brokerRole" => "SYNC_MASTER".to_owned(),
            "flushDiskType" => "SYNC_FLUSH".to_owned(),
            "tls.server.mode" => "permissive".to_owned(),
            "tls.server.need.client.auth" => "optional".to_owned(),
            "deleteWhen" => "04;10".to_owned(),
            "inSyncReplicas" | "metricsPort" => "3".to_owned(),
            k if k.ends_with("Address") && !k.starts_with("haMaster") => "0.0.0.0".to_owned(),
            _ => match before.as_deref() {
                Some("true") => "false".to_owned(),
                Some("false") => "true".to_owned(),
                Some(v) => match v.parse::<i64>() {
                    Ok(n) => (n + 20 * 4096).to_string(),
                    Err(_) => format!("{v}-{i}"),
                },
                None => format!("h{i}:{}", 1000 + i),
            },
        };
        c.set(key, &value)
            .unwrap_or_else(|e| panic!("{key}={value}: {e}"));
        assert_eq!(c.get(key).as_deref(), Some(value.as_str()), "{key}");
    }
    let text = c.to_properties();
    for secret in ["haAuthSecret=", "keyPassword="] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    let pairs: Vec<(String, String)> = parse_properties(&text)
        .expect("written properties parse")
        .into_iter()
        .map(|(_, k, v)| (k, v))
        .collect();
    let mut again = BrokerConfig::default();
    for (k, v) in &pairs {
        again.set(k, v).expect("written back as read");
    }
    for key in BrokerConfig::KEYS {
        if !SECRET_KEYS.contains(key) {
            assert_eq!(again.get(key), c.get(key), "{key}");
        }
    }
}

#[test]
fn bad_values_name_the_key_and_value() {
    assert_eq!(
        problem(&[("brokerRole", "MASTER")]),
        "brokerRole: bad value 'MASTER', expected BrokerRole (one of ASYNC_MASTER, \
         SYNC_MASTER, SLAVE)"
    );
    assert_eq!(
        problem(&[("haListenPort", "ten")]),
        "haListenPort: bad value 'ten', expected int"
    );
    assert_eq!(
        problem(&[("slaveReadEnable", "yes")]),
        "slaveReadEnable: bad value 'yes', expected bool"
    );
    assert!(problem(&[("flushDiskType", "x")]).starts_with("flushDiskType: bad value 'x'"));
    // Values are trimmed and case-insensitive where RocketMQ's are.
    let c = load(&[("brokerRole", " sync_master "), ("aclEnable", "TRUE")])
        .expect("loads")
        .config;
    assert_eq!(c.broker_role, BrokerRole::SyncMaster);
    assert!(c.acl_enable);
    assert_eq!(c.in_sync_replicas(), 2);
    assert_eq!(c.slave_acks_required(), 1);
}

#[test]
fn contradictions_and_ranges_name_the_key() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("messageDelayLevel", "1s 2x")],
            "messageDelayLevel: level '2x' is not a whole number of s, m, h or d",
        ),
        (
            &[("flushDelayOffsetInterval", "0")],
            "flushDelayOffsetInterval: must be a positive number",
        ),
        (
            &[("brokerRole", "SLAVE"), ("haMasterAddress", "h:1")],
            "brokerId: a SLAVE needs brokerId > 0",
        ),
        (
            &[("brokerId", "2")],
            "brokerId: a ASYNC_MASTER must have brokerId 0",
        ),
        (
            &[("brokerRole", "SLAVE"), ("brokerId", "1")],
            "haMasterAddress: a SLAVE needs",
        ),
        (
            &[("haMasterAddress", "nohost")],
            "haMasterAddress: 'nohost' is not host:port",
        ),
        (&[("haTransferBatchSize", "4194304")], "haTransferBatchSize"),
        (
            &[("mappedFileSizeCommitLog", "1000")],
            "mappedFileSizeCommitLog",
        ),
        (
            &[("mappedFileSizeConsumeQueue", "30")],
            "mappedFileSizeConsumeQueue",
        ),
        (
            &[("listenPort", "70000")],
            "listenPort: must be in [0, 65535]",
        ),
        (
            &[("namesrvAddr", "a:1;b")],
            "namesrvAddr: 'b' is not host:port",
        ),
        (&[("defaultTopicQueueNums", "0")], "defaultTopicQueueNums"),
        (&[("brokerPermission", "8")], "brokerPermission"),
        (&[("inSyncReplicas", "0")], "inSyncReplicas"),
        (
            &[("slaveSyncInterval", "0")],
            "slaveSyncInterval: must be a positive",
        ),
        (
            &[("haHousekeepingInterval", "100")],
            "haHousekeepingInterval",
        ),
        (&[("haTransferCrc", "true")], "haTransferCrc"),
        (&[("maxMessageSize", "0")], "maxMessageSize"),
        (
            &[("transactionTimeOut", "-1")],
            "transactionTimeOut: must be a positive number",
        ),
        (
            &[("transactionCheckInterval", "0")],
            "transactionCheckInterval: must be a positive number",
        ),
        (&[("transactionCheckMax", "0")], "transactionCheckMax"),
        (
            &[("maxTopicQueueNums", "4")],
            "maxTopicQueueNums: must be at least defaultTopicQueueNums (8)",
        ),
        (
            &[("rebalanceLockMaxLiveTime", "0")],
            "rebalanceLockMaxLiveTime: must be a positive number",
        ),
        (
            &[("tableTierTopics", "orders")],
            "tableTierPath: tableTierTopics is set",
        ),
        (
            &[("tableTierPath", "/data/t")],
            "tableTierTopics: tableTierPath is set",
        ),
        (
            &[
                ("tableTierTopics", "a"),
                ("tableTierPath", "/t"),
                ("tableTierTailAge", "-1"),
            ],
            "tableTierTailAge: must be 0 or more",
        ),
        (
            &[("tableTierInterval", "0")],
            "tableTierInterval: must be a positive number",
        ),
        (
            &[("accessMessageInMemoryMaxRatio", "101")],
            "accessMessageInMemoryMaxRatio: must be a percentage",
        ),
        (
            &[("maxTransferBytesOnMessageInDisk", "0")],
            "maxTransferBytesOnMessageInDisk: must be positive",
        ),
        (&[("tls.server.mode", "on")], "tls.server.mode"),
        (
            &[("tls.server.need.client.auth", "x")],
            "tls.server.need.client.auth",
        ),
        (
            &[("tls.client.keyPassword", "p")],
            "tls.client.keyPassword: encrypted",
        ),
        (
            &[("metricsAddress", "localhost")],
            "metricsAddress: must be an IP",
        ),
        (&[("deleteWhen", "25")], "retention: deleteWhen"),
        (
            &[("fileReservedTime", "-1")],
            "retention: fileReservedTime -1",
        ),
        (
            &[("diskMaxUsedSpaceRatio", "101")],
            "retention: diskMaxUsedSpaceRatio",
        ),
        (
            &[("deleteFileBatchMax", "0")],
            "retention: deleteFileBatchMax",
        ),
    ];
    for (pairs, expected) in cases {
        let got = problem(pairs);
        assert!(got.contains(expected), "{pairs:?}: {got}");
    }
}

#[test]
fn unknown_keys_fail_with_a_suggestion_and_rocketmqs_others_are_ignored() {
    assert_eq!(
        problem(&[("brokerRol", "SLAVE")]),
        "unknown key 'brokerRol'; did you mean 'brokerRole'?"
    );
    assert_eq!(problem(&[("zzz", "1")]), "unknown key 'zzz'");
    let loaded = load(&[("traceTopicEnable", " false"), ("brokerName", "b")]).expect("loads");
    assert_eq!(loaded.config.broker_name, "b");
    assert_eq!(
        loaded.ignored.into_iter().collect::<Vec<_>>(),
        vec![("traceTopicEnable".to_owned(), "false".to_owned())]
    );
}

#[test]
fn controller_mode_needs_its_controllers_and_name_servers() {
    let base = [
        ("enableControllerMode", "true"),
        ("brokerId", "-1"),
        ("brokerRole", "SLAVE"),
    ];
    let with = |more: &[(&'static str, &'static str)]| {
        let mut all = base.to_vec();
        all.extend_from_slice(more);
        all
    };
    assert!(problem(&with(&[("namesrvAddr", "n:9876")])).starts_with("controllerAddr: "));
    assert!(problem(&with(&[
        ("controllerAddr", "c:1;nope"),
        ("namesrvAddr", "n:9876")
    ]))
    .contains("'nope' is not host:port"));
    assert!(problem(&with(&[("controllerAddr", "c:9878")])).starts_with("namesrvAddr: "));
    assert_eq!(
        problem(&[("brokerElectionPriority", "4294967296")]),
        "brokerElectionPriority: 4294967296 is not a 32-bit integer (RocketMQ's is an int)"
    );
    assert!(
        problem(&[("minInSyncReplicas", "0")]).starts_with("minInSyncReplicas: must be at least 1")
    );
    assert!(problem(&[("minInSyncReplicas", "4294967296")]).starts_with("minInSyncReplicas: "));
    assert!(problem(&[("syncBrokerMetadataPeriod", "0")])
        .starts_with("syncBrokerMetadataPeriod: must be a positive"));
    // brokerId -1 and brokerRole SLAVE, as RocketMQ's controller-mode configs have them.
    let loaded = load(&with(&[
        ("controllerAddr", "c:9878;d:9878"),
        ("namesrvAddr", "n:9876"),
    ]))
    .expect("loads");
    assert!(loaded.config.enable_controller_mode && loaded.ignored.is_empty());
    // RocketMQ 5's inSyncReplicas default, 1, whatever role the controller gives the broker;
    // minInSyncReplicas reaches the store's wait policy.
    let mut master = load(&with(&[
        ("controllerAddr", "c:9878"),
        ("namesrvAddr", "n:9876"),
        ("minInSyncReplicas", "2"),
    ]))
    .expect("loads")
    .config;
    master.broker_role = BrokerRole::SyncMaster;
    assert_eq!(master.in_sync_replicas(), 1);
    let store = master
        .store_config("127.0.0.1:1".parse().unwrap())
        .expect("store config");
    let policy = store.wait_policy();
    assert_eq!((policy.slaves, policy.min_in_sync_replicas), (0, 2));
}

#[test]
fn properties_text_as_broker_conf_writes_it() {
    let text = "# c\n! c\n\nbrokerName = x\nbrokerId:0\nlistenPort 1\nnamesrvAddr=a:1;b:2\nk=\n";
    let parsed = parse_properties(text).expect("parses");
    let keys: Vec<(usize, &str, &str)> = parsed
        .iter()
        .map(|(n, k, v)| (*n, k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        keys,
        vec![
            (4, "brokerName", "x"),
            (5, "brokerId", "0"),
            (6, "listenPort", "1"),
            (7, "namesrvAddr", "a:1;b:2"),
            (8, "k", ""),
        ]
    );
    let err = parse_properties("a=1\njustakey\n").expect_err("no value");
    assert_eq!(err.line, 2);
}

#[test]
fn empty_optional_values_unset_the_key() {
    let c = load(&[("namesrvAddr", ""), ("metricsPort", "0")])
        .expect("loads")
        .config;
    assert_eq!((c.namesrv_addr, c.metrics_port), (None, Some(0)));
}

#[test]
fn the_lock_life_and_compressed_registration_reach_the_processors() {
    let c = load(&[
        ("rebalanceLockMaxLiveTime", "6000"),
        ("compressedRegister", "true"),
    ])
    .expect("valid")
    .config;
    let s = c.settings();
    assert_eq!(s.rebalance_lock_max_live_time, Duration::from_secs(6));
    assert!(s.compressed_register);
    let defaults = BrokerConfig::default().settings();
    assert_eq!(
        defaults.rebalance_lock_max_live_time,
        Duration::from_secs(60)
    );
    assert!(!defaults.compressed_register);
}

#[test]
fn services_configs_are_derived_with_the_same_defaults() {
    let c = BrokerConfig::default();
    let s = c.settings();
    assert_eq!(
        (
            s.cluster_name.as_str(),
            s.broker_name.as_str(),
            s.broker_id,
            s.is_slave
        ),
        ("DefaultCluster", "broker-a", 0, false)
    );
    assert_eq!(
        (s.default_topic_queue_nums, s.broker_permission.get()),
        (8, 6)
    );
    assert_eq!(
        (
            s.max_message_size.get(),
            s.access_message_in_memory_max_ratio
        ),
        (4 << 20, 40)
    );
    assert_eq!(
        (
            s.max_transfer_in_memory.bytes,
            s.max_transfer_in_memory.count
        ),
        (256 * 1024, 32)
    );
    assert_eq!(
        (s.max_transfer_in_disk.bytes, s.max_transfer_in_disk.count),
        (64 * 1024, 8)
    );
    let controller = c.controller_config();
    assert_eq!(controller.broker_role, "ASYNC_MASTER");
    assert_eq!(
        controller.register_name_server_period,
        Duration::from_secs(30)
    );
    assert_eq!(controller.slave_sync_interval, Duration::from_secs(60));
    assert!(!controller.update_master_ha_server_addr_periodically);
    let host: SocketAddr = "127.0.0.1:1".parse().expect("address");
    let store = c.store_config(host).expect("store config");
    let plain = StoreConfig::new(&c.store_path_root_dir);
    assert_eq!(store.mapped_file_size, plain.mapped_file_size);
    assert_eq!(store.cq_entries_per_file, plain.cq_entries_per_file);
    assert_eq!(store.clean, plain.clean);
    assert_eq!((store.store_host, store.sync_slaves), (host, 0));
    let ha = c.ha_config(None);
    let plain = HaConfig::default();
    assert_eq!(ha.transfer_batch_size, plain.transfer_batch_size);
    assert_eq!(ha.heartbeat_interval, plain.heartbeat_interval);
    assert_eq!(ha.max_transfer_bytes_per_second, None);

    let sync = load(&[("brokerRole", "SYNC_MASTER"), ("inSyncReplicas", "3")])
        .expect("loads")
        .config;
    assert_eq!(sync.store_config(host).expect("store").sync_slaves, 2);
    let slave = load(&[
        ("brokerRole", "SLAVE"),
        ("brokerId", "1"),
        ("haMasterAddress", "m:1"),
        ("namesrvAddr", "n:1"),
        ("haListenAddress", "0.0.0.0"),
        ("brokerIP1", "10.0.0.1"),
    ])
    .expect("loads")
    .config;
    let controller = slave.controller_config();
    assert!(controller.settings.is_slave);
    assert_eq!(
        controller.check_master_ha_server_addr.as_deref(),
        Some("m:1")
    );
    assert_eq!(slave.advertised_ha_address(7), "10.0.0.1:7");
}

/// Each derived config as text, `broker.conf`'s own copy left out of the controller's.
fn services(c: &BrokerConfig) -> Vec<(&'static str, String)> {
    let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
    let mut controller = c.controller_config();
    controller.broker_config = BrokerConfig::default();
    // The processors' settings are a service of their own below.
    controller.settings = BrokerConfig::default().settings();
    vec![
        ("store", format!("{:?}", c.store_config(host).ok())),
        ("ha", format!("{:?}", c.ha_config(None))),
        ("processors", format!("{:?}", c.settings())),
        ("controller", format!("{controller:?}")),
        (
            "replicas",
            format!(
                "{:?} {:?}",
                c.replicas_config("b".into(), "p".into()),
                c.controller_addrs()
            ),
        ),
    ]
}

/// Values to try for a key besides its default, the first that loads alone being taken.
fn other_values(default: &Value) -> Vec<String> {
    match default {
        Value::Int(n) => [n + 1, n.saturating_mul(2), 1, 2, 100, 60_000]
            .iter()
            .filter(|v| *v != n)
            .map(i64::to_string)
            .collect(),
        Value::Bool(b) => vec![(!b).to_string()],
        Value::Str(_) | Value::Unset => [
            "127.0.0.2",
            "127.0.0.1:9876",
            "SYNC_MASTER",
            "SYNC_FLUSH",
            "04",
            "x",
            "1s 2s",
        ]
        .map(str::to_owned)
        .to_vec(),
    }
}

/// Which keys reach which service's config, found by setting each key to another value and
/// comparing each derived config with the defaults'. A key the broker reads for a service
/// must reach it through `derive.rs`: a key that stops reaching its service, or a service that
/// starts reading another key, shows up here.
#[test]
fn the_keys_that_reach_each_service() {
    let defaults = BrokerConfig::default();
    let base = services(&defaults);
    let mut reach: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for (&key, (_, default)) in BrokerConfig::KEYS.iter().zip(defaults.values()) {
        let changed = other_values(&default)
            .iter()
            .find_map(|v| load(&[(key, v)]).ok().filter(|l| l.config != defaults));
        let Some(loaded) = changed else {
            reach.entry("(not probed alone)").or_default().push(key);
            continue;
        };
        let mut reached = false;
        for ((service, before), (_, after)) in base.iter().zip(services(&loaded.config)) {
            if *before != after {
                reach.entry(service).or_default().push(key);
                reached = true;
            }
        }
        if !reached {
            // Ports, addresses, secrets, TLS files: what the Python broker binds or reads.
            reach.entry("(the broker process)").or_default().push(key);
        }
    }
    let listed: Vec<(&str, String)> = reach
        .iter()
        .map(|(service, keys)| (*service, keys.join(" ")))
        .collect();
    let expected: &[(&str, &str)] = &[
        (
            "(not probed alone)",
            concat!(
                "brokerId tls.server.mode tls.server.keyPassword tls.server.need.client.auth ",
                "tls.client.keyPassword haTransferCrc deleteWhen tableTierTopics tableTierPath ",
                "enableControllerMode",
            ),
        ),
        (
            "(the broker process)",
            concat!(
                "listenPort listenAddress remotingAllowInsecure tls.server.certPath ",
                "tls.server.keyPath tls.server.trustCertPath tls.enable tls.test.mode.enable ",
                "tls.client.trustCertPath tls.client.certPath tls.client.keyPath aclEnable ",
                "aclPlainFile haListenPort haListenAddress haMasterAddress inSyncReplicas ",
                "maxHaTransferByteInSecond haAuthSecret haAuthSecretFile haAuthSecretEnv ",
                "haAllowInsecure metricsPort metricsAddress tableTierInterval tableTierTailAge ",
                "allAckInSyncStateSet haMaxTimeSlaveNotCatchup",
            ),
        ),
        (
            "controller",
            concat!(
                "brokerRole brokerIP1 namesrvAddr registerNameServerPeriod ",
                "flushConsumerOffsetInterval slaveSyncInterval",
            ),
        ),
        (
            "ha",
            concat!(
                "haSendHeartbeatInterval haHousekeepingInterval haTransferBatchSize ",
                "haFlowControlEnable syncFromLastFile haAcceptZeroBodyCrc",
            ),
        ),
        (
            "processors",
            concat!(
                "brokerClusterName brokerName compressedRegister autoCreateTopicEnable ",
                "clusterTopicEnable brokerTopicEnable defaultTopicQueueNums maxTopicQueueNums ",
                "brokerPermission slaveReadEnable accessMessageInMemoryMaxRatio ",
                "whichBrokerWhenConsumeSlowly enablePropertyFilter longPollingEnable ",
                "autoCreateSubscriptionGroup maxTransferBytesOnMessageInMemory ",
                "maxTransferCountOnMessageInMemory maxTransferBytesOnMessageInDisk ",
                "maxTransferCountOnMessageInDisk maxMessageSize fileReservedTime ",
                "fileReservedTimeUnitMs recallMessageEnable enableTopicMessageTypeCheck ",
                "enableMixedMessageType reviveQueueNum popFromRetryProbability ",
                "enableRetryTopicV2 retrieveMessageFromPopRetryTopicV1 ",
                "popResponseReturnActualRetryTopic popPollingSize rejectTransactionMessage ",
                "transactionTimeOut transactionCheckMax transactionCheckInterval ",
                "rebalanceLockMaxLiveTime",
            ),
        ),
        (
            "replicas",
            concat!(
                "brokerClusterName brokerName controllerAddr brokerHeartbeatInterval ",
                "controllerHeartBeatTimeoutMills syncBrokerMetadataPeriod ",
                "syncControllerMetadataPeriod brokerElectionPriority",
            ),
        ),
        (
            "store",
            concat!(
                "brokerRole flushDiskType storePathRootDir mappedFileSizeCommitLog ",
                "mappedFileSizeConsumeQueue slaveTimeout syncFlushTimeout haMaxGapNotInSync ",
                "flushIntervalCommitLog haAcceptZeroBodyCrc fileReservedTime ",
                "diskMaxUsedSpaceRatio diskSpaceCleanForciblyRatio diskSpaceWarningLevelRatio ",
                "cleanResourceInterval deleteFileBatchMax fileReservedTimeUnitMs ",
                "storePathCommitLog messageDelayLevel flushDelayOffsetInterval timerWheelEnable ",
                "timerPrecisionMs timerMaxDelaySec timerRollWindowSlot timerFlushIntervalMs ",
                "mappedFileSizeTimerLog timerCongestNumEachSlot minInSyncReplicas ",
                "messageIndexEnable maxHashSlotNum maxIndexNum",
            ),
        ),
    ];
    let listed: Vec<(&str, &str)> = listed.iter().map(|(s, k)| (*s, k.as_str())).collect();
    assert_eq!(listed, expected);
}
