use super::*;

fn cache(dir: &Path) -> (PathBuf, EpochFileCache) {
    let path = dir.join("epochFileCheckpoint");
    let cache = EpochFileCache::load(&path).unwrap();
    (path, cache)
}

#[test]
fn the_file_is_rocketmqs_checkpoint_format() {
    let dir = tempfile::tempdir().unwrap();
    let (path, epochs) = cache(dir.path());
    epochs.append(7, 7000).unwrap();
    epochs.append(8, 8000).unwrap();
    // CheckpointFile's own example: "7-7000\n8-8000\n" has the masked CRC 773307083.
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "2\n773307083\n7-7000\n8-8000\n"
    );
    // The content before the last write is the backup.
    assert_eq!(
        std::fs::read_to_string(backup(&path)).unwrap(),
        format!("1\n{}\n7-7000\n", masked_crc(b"7-7000\n"))
    );
    let again = EpochFileCache::load(&path).unwrap();
    assert_eq!(
        again.entries(),
        vec![
            EpochEntry {
                epoch: 7,
                start_offset: 7000,
                end_offset: 8000
            },
            EpochEntry::new(8, 8000)
        ]
    );
}

#[test]
fn an_entry_must_follow_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let (_, epochs) = cache(dir.path());
    epochs.append(1, 0).unwrap();
    // A second election before anything was written: RocketMQ keeps epoch 1's entry.
    assert_eq!(
        epochs.append(2, 0),
        Err(EpochFileError::NotAfterLast {
            new_epoch: 2,
            new_start: 0,
            last_epoch: 1,
            last_start: 0
        })
    );
    assert!(epochs.append(1, 500).is_err());
    epochs.append(3, 500).unwrap();
    assert_eq!(epochs.last_epoch(), 3);
    assert_eq!(epochs.entry_by_offset(499).unwrap().epoch, 1);
    assert_eq!(epochs.entry_by_offset(500).unwrap().epoch, 3);
    assert_eq!(epochs.next_entry(1).unwrap().epoch, 3);
    assert_eq!(epochs.next_entry(3), None);
}

#[test]
fn the_consistent_point_is_the_end_of_the_newest_shared_epoch() {
    let master = EpochFileCache::in_memory([(1, 0), (2, 1000), (3, 5000)]);
    master.set_last_end_offset(6000);
    // Same history, behind: it agrees up to its own end.
    let slave = EpochFileCache::in_memory([(1, 0), (2, 1000)]);
    slave.set_last_end_offset(3000);
    assert_eq!(slave.find_consistent_point(&master), Some(3000));
    // A deposed master of epoch 2 that wrote past the point where epoch 3 began.
    let deposed = EpochFileCache::in_memory([(1, 0), (2, 1000)]);
    deposed.set_last_end_offset(5600);
    assert_eq!(deposed.find_consistent_point(&master), Some(5000));
    // Epoch 2 began elsewhere on this log: only epoch 1 is shared.
    let forked = EpochFileCache::in_memory([(1, 0), (2, 900)]);
    forked.set_last_end_offset(950);
    assert_eq!(forked.find_consistent_point(&master), Some(900));
    // Nothing shared: a slave must start over.
    let stranger = EpochFileCache::in_memory([(4, 0)]);
    assert_eq!(stranger.find_consistent_point(&master), None);
    assert_eq!(
        EpochFileCache::in_memory([]).find_consistent_point(&master),
        None
    );
}

#[test]
fn truncation_reopens_the_last_epoch_and_is_persisted() {
    let dir = tempfile::tempdir().unwrap();
    let (path, epochs) = cache(dir.path());
    for (epoch, start) in [(1, 0), (2, 1000), (3, 5000)] {
        epochs.append(epoch, start).unwrap();
    }
    epochs.truncate_suffix_by_offset(4000).unwrap();
    assert_eq!(
        epochs.entries(),
        vec![
            EpochEntry {
                epoch: 1,
                start_offset: 0,
                end_offset: 1000
            },
            EpochEntry::new(2, 1000),
        ]
    );
    epochs.truncate_suffix_by_epoch(2).unwrap();
    epochs.truncate_prefix_by_offset(0).unwrap();
    assert_eq!(epochs.entries(), vec![EpochEntry::new(1, 0)]);
    epochs.truncate_suffix_by_epoch(1).unwrap();
    // Emptied, and it stays empty after a restart (RocketMQ would skip this write).
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "0\n0\n");
    assert!(EpochFileCache::load(&path).unwrap().entries().is_empty());
}

#[test]
fn a_damaged_file_falls_back_to_the_backup_or_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let (path, epochs) = cache(dir.path());
    epochs.append(1, 0).unwrap();
    epochs.append(2, 100).unwrap();
    // Torn: the CRC no longer matches. The backup holds the state before the last append.
    std::fs::write(&path, "2\n773307083\n1-0\n2-100\n").unwrap();
    assert_eq!(
        EpochFileCache::load(&path).unwrap().entries(),
        vec![EpochEntry::new(1, 0)]
    );
    std::fs::write(backup(&path), "garbage").unwrap();
    let err = EpochFileCache::load(&path).err().unwrap().to_string();
    assert!(
        err.contains("epochFileCheckpoint:") && err.contains("CRC 773307083"),
        "{err}"
    );
    for (content, why) in [
        ("3\n0\n1-0\n", "says 3 entries"),
        ("1\n0\n1:0\n", "is not epoch-startOffset"),
        ("2\n0\n2-0\n1-5\n", "does not follow"),
        ("x\n", "is not a number"),
    ] {
        std::fs::write(&path, content).unwrap();
        let err = EpochFileCache::load(&path).err().unwrap().to_string();
        assert!(err.contains(why), "{content:?}: {err}");
    }
    // A CRC of 0 is not checked (RocketMQ's NOT_CHECK_CRC_MAGIC_CODE).
    std::fs::write(&path, "1\n0\n5-10\n").unwrap();
    assert_eq!(EpochFileCache::load(&path).unwrap().last_epoch(), 5);
}
