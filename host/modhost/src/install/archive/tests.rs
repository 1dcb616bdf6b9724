//! Archives are built here, in the test, with the same crates' writers; the
//! hostile ones write raw header names so the writer's own checks do not
//! stop them being made.

use super::*;

enum Item<'a> {
    File(&'a str, &'a [u8], u32),
    Dir(&'a str),
    Symlink(&'a str, &'a str),
    HardLink(&'a str, &'a str),
}

fn raw_name(header: &mut tar::Header, name: &str) {
    let gnu = header.as_gnu_mut().unwrap();
    gnu.name = [0; 100];
    gnu.name[..name.len()].copy_from_slice(name.as_bytes());
}

fn tar_gz(path: &Path, items: &[Item<'_>]) {
    let file = File::create(path).unwrap();
    let encoder = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    let mut builder = tar::Builder::new(encoder);
    for item in items {
        let mut header = tar::Header::new_gnu();
        match item {
            Item::File(name, data, mode) => {
                raw_name(&mut header, name);
                header.set_entry_type(tar::EntryType::Regular);
                header.set_mode(*mode);
                header.set_size(data.len() as u64);
                header.set_cksum();
                builder.append(&header, *data).unwrap();
            }
            Item::Dir(name) => {
                raw_name(&mut header, name);
                header.set_entry_type(tar::EntryType::Directory);
                header.set_mode(0o755);
                header.set_size(0);
                header.set_cksum();
                builder.append(&header, std::io::empty()).unwrap();
            }
            Item::Symlink(name, target) | Item::HardLink(name, target) => {
                raw_name(&mut header, name);
                let kind = match item {
                    Item::Symlink(..) => tar::EntryType::Symlink,
                    _ => tar::EntryType::Link,
                };
                header.set_entry_type(kind);
                header.as_gnu_mut().unwrap().linkname[..target.len()]
                    .copy_from_slice(target.as_bytes());
                header.set_size(0);
                header.set_cksum();
                builder.append(&header, std::io::empty()).unwrap();
            }
        }
    }
    builder.into_inner().unwrap().finish().unwrap();
}

fn zip_file(path: &Path, items: &[Item<'_>]) {
    use zip::write::SimpleFileOptions;
    let mut writer = zip::ZipWriter::new(File::create(path).unwrap());
    let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for item in items {
        match item {
            Item::File(name, data, mode) => {
                writer
                    .start_file(*name, options.unix_permissions(*mode))
                    .unwrap();
                writer.write_all(data).unwrap();
            }
            Item::Dir(name) => writer.add_directory(*name, options).unwrap(),
            Item::Symlink(name, target) => writer.add_symlink(*name, *target, options).unwrap(),
            Item::HardLink(..) => unreachable!("zip has no hard links"),
        }
    }
    writer.finish().unwrap();
}

/// Build `items` as both formats and unpack each into a fresh staging folder.
fn both(
    items: &[Item<'_>],
    limits: ArchiveLimits,
) -> Vec<(PathBuf, Result<Vec<PathBuf>, ArchiveError>)> {
    let dir = tempfile::tempdir().unwrap().keep();
    let mut results = Vec::new();
    let zip_ok = !items.iter().any(|i| matches!(i, Item::HardLink(..)));
    let formats = [
        ("m.tar.gz", ArchiveFormat::TarGz),
        ("m.zip", ArchiveFormat::Zip),
    ];
    for (name, format) in formats {
        if format == ArchiveFormat::Zip && !zip_ok {
            continue;
        }
        let archive = dir.join(name);
        match format {
            ArchiveFormat::TarGz => tar_gz(&archive, items),
            ArchiveFormat::Zip => zip_file(&archive, items),
        }
        let staging = dir.join(format!("staging-{name}"));
        let result = extract(&archive, format, &staging, limits);
        results.push((staging, result));
    }
    results
}

fn assert_refused(
    items: &[Item<'_>],
    limits: ArchiveLimits,
    expect: impl Fn(&ArchiveError) -> bool,
) {
    for (staging, result) in both(items, limits) {
        let err = result.expect_err("a hostile archive was unpacked");
        assert!(expect(&err), "unexpected error: {err}");
        assert!(
            !staging.exists(),
            "{} was left behind after: {err}",
            staging.display()
        );
    }
}

fn is_unsafe(err: &ArchiveError) -> bool {
    matches!(err, ArchiveError::UnsafeEntry { .. })
}

#[test]
fn a_good_archive_unpacks_with_modes_and_inner_links() {
    let items = [
        Item::Dir("tool-1.0/"),
        Item::File("tool-1.0/tool", b"#!/bin/sh\n", 0o4755),
        Item::File("tool-1.0/knowledge/intro.md", b"# intro", 0o666),
        Item::Symlink("tool-1.0/knowledge/latest.md", "intro.md"),
        Item::Symlink("tool-1.0/knowledge/up.md", "../tool"),
    ];
    for (staging, result) in both(&items, ArchiveLimits::default()) {
        use std::os::unix::fs::PermissionsExt;
        let files = result.unwrap();
        assert_eq!(
            files,
            vec![
                PathBuf::from("tool-1.0/tool"),
                PathBuf::from("tool-1.0/knowledge/intro.md")
            ]
        );
        let mode = |p: &str| {
            std::fs::metadata(staging.join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777
        };
        assert_eq!(mode("tool-1.0/tool"), 0o755, "setuid must be dropped");
        assert_eq!(
            mode("tool-1.0/knowledge/intro.md"),
            0o644,
            "world-writable must be dropped"
        );
        assert_eq!(
            std::fs::read_to_string(staging.join("tool-1.0/knowledge/latest.md")).unwrap(),
            "# intro"
        );
    }
}

#[test]
fn parent_traversal_is_refused() {
    assert_refused(
        &[Item::File("../x", b"evil", 0o644)],
        ArchiveLimits::default(),
        is_unsafe,
    );
    assert_refused(
        &[Item::File("a/../../x", b"evil", 0o644)],
        ArchiveLimits::default(),
        is_unsafe,
    );
}

#[test]
fn absolute_paths_are_refused() {
    assert_refused(
        &[Item::File("/etc/x", b"evil", 0o644)],
        ArchiveLimits::default(),
        |e| is_unsafe(e) && e.to_string().contains("absolute"),
    );
}

#[test]
fn symlinks_pointing_outside_are_refused() {
    assert_refused(
        &[Item::Symlink("passwd", "/etc/passwd")],
        ArchiveLimits::default(),
        is_unsafe,
    );
    assert_refused(
        &[Item::Symlink("a/up", "../../x")],
        ArchiveLimits::default(),
        is_unsafe,
    );
    // Climbing after descending could escape through a link named `a`.
    assert_refused(
        &[Item::Symlink("a", "."), Item::Symlink("b", "a/../..")],
        ArchiveLimits::default(),
        is_unsafe,
    );
}

#[test]
fn writing_through_a_planted_symlink_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().display().to_string();
    // Even a link that passed the lexical check must not be written through.
    assert_refused(
        &[Item::Symlink("d", "."), Item::File("d/x", b"x", 0o644)],
        ArchiveLimits::default(),
        is_unsafe,
    );
    assert_refused(
        &[Item::Symlink("d", &target), Item::File("d/x", b"x", 0o644)],
        ArchiveLimits::default(),
        is_unsafe,
    );
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

#[test]
fn hard_links_must_name_an_earlier_file() {
    assert_refused(
        &[Item::HardLink("shadow", "/etc/shadow")],
        ArchiveLimits::default(),
        is_unsafe,
    );
    assert_refused(
        &[Item::HardLink("x", "missing")],
        ArchiveLimits::default(),
        is_unsafe,
    );
    let items = [
        Item::File("tool", b"bin", 0o755),
        Item::HardLink("copy", "tool"),
    ];
    for (staging, result) in both(&items, ArchiveLimits::default()) {
        assert_eq!(result.unwrap().len(), 2);
        assert_eq!(std::fs::read(staging.join("copy")).unwrap(), b"bin");
    }
}

#[test]
fn duplicate_entries_are_refused() {
    let items = [
        Item::File("tool", b"one", 0o755),
        Item::File("tool", b"two", 0o755),
    ];
    // The zip writer itself refuses duplicate names, so only tar can carry them.
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("dup.tar.gz");
    tar_gz(&archive, &items);
    let staging = dir.path().join("staging");
    let err = extract(
        &archive,
        ArchiveFormat::TarGz,
        &staging,
        ArchiveLimits::default(),
    )
    .unwrap_err();
    assert!(
        is_unsafe(&err) && err.to_string().contains("twice"),
        "{err}"
    );
    assert!(!staging.exists());
}

#[test]
fn too_many_files_are_refused() {
    let names: Vec<String> = (0..11).map(|i| format!("f{i}")).collect();
    let items: Vec<Item<'_>> = names.iter().map(|n| Item::File(n, b"x", 0o644)).collect();
    let limits = ArchiveLimits {
        max_total_bytes: 1 << 20,
        max_entries: 10,
    };
    assert_refused(&items, limits, |e| {
        matches!(e, ArchiveError::TooManyEntries { limit: 10, .. })
    });
}

#[test]
fn too_many_bytes_are_refused_by_what_decompresses() {
    // 2 MiB of zeros compresses to a few KiB: the cap must count output.
    let big = vec![0u8; 2 << 20];
    let limits = ArchiveLimits {
        max_total_bytes: 1 << 20,
        max_entries: 10,
    };
    assert_refused(&[Item::File("big", &big, 0o644)], limits, |e| {
        matches!(e, ArchiveError::TooBig { .. })
    });
}

#[test]
fn an_existing_staging_folder_is_not_reused() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("m.tar.gz");
    tar_gz(&archive, &[Item::File("tool", b"x", 0o755)]);
    let err = extract(
        &archive,
        ArchiveFormat::TarGz,
        dir.path(),
        ArchiveLimits::default(),
    )
    .unwrap_err();
    assert!(matches!(err, ArchiveError::StagingExists { .. }), "{err}");
    assert!(
        archive.exists(),
        "a refused staging folder must not be removed"
    );
}

#[test]
fn garbage_is_corrupt_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for (name, format) in [
        ("g.tar.gz", ArchiveFormat::TarGz),
        ("g.zip", ArchiveFormat::Zip),
    ] {
        let archive = dir.path().join(name);
        std::fs::write(&archive, b"this is not an archive at all").unwrap();
        let staging = dir.path().join(format!("s-{name}"));
        let err = extract(&archive, format, &staging, ArchiveLimits::default()).unwrap_err();
        assert!(matches!(err, ArchiveError::Corrupt { .. }), "{err}");
        assert!(!staging.exists());
    }
}

#[test]
fn formats_by_name() {
    assert_eq!(
        ArchiveFormat::of_path(Path::new("/a/m-1.0.tar.gz")),
        Some(ArchiveFormat::TarGz)
    );
    assert_eq!(
        ArchiveFormat::of_path(Path::new("m.TGZ")),
        Some(ArchiveFormat::TarGz)
    );
    assert_eq!(
        ArchiveFormat::of_path(Path::new("m.zip")),
        Some(ArchiveFormat::Zip)
    );
    assert_eq!(ArchiveFormat::of_path(Path::new("m.wasm")), None);
    assert_eq!(ArchiveFormat::of_path(Path::new("m")), None);
}

#[test]
fn link_checks() {
    assert!(link_stays_inside(Path::new("a/b"), Path::new("../../x")));
    assert!(!link_stays_inside(
        Path::new("a/b"),
        Path::new("../../../x")
    ));
    assert!(!link_stays_inside(Path::new(""), Path::new("x/../..")));
    assert!(!link_stays_inside(Path::new("a"), Path::new("/x")));
    assert!(safe_relative("./a/./b").is_ok_and(|p| p == Path::new("a/b")));
    assert!(safe_relative("a/../b").is_err());
}
