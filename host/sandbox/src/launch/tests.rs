//! The host doing `env`'s part of an exec-gated module's start: what it
//! executes for each kind of `#!` line, what it refuses, and that what it
//! executes behaves as the kernel and `env` together would.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Command;

use super::*;

fn script(path: &Path, body: &str) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_path_buf()
}

fn shebang(line: &str) -> Option<(String, Option<String>)> {
    kernel_shebang(line.as_bytes()).map(|(name, arg)| {
        (
            String::from_utf8(name).unwrap(),
            arg.map(|a| String::from_utf8(a).unwrap()),
        )
    })
}

#[test]
fn a_shebang_line_is_read_as_the_kernel_reads_it() {
    let some = |name: &str, arg: Option<&str>| Some((name.to_owned(), arg.map(str::to_owned)));
    assert_eq!(shebang("#!/bin/sh\necho"), some("/bin/sh", None));
    assert_eq!(
        shebang("#! \t/usr/bin/env  python3 -u \t\nrest"),
        some("/usr/bin/env", Some("python3 -u")),
        "one argument: the rest of the line, trimmed"
    );
    assert_eq!(
        shebang("#!/usr/bin/env\tpython3\n"),
        some("/usr/bin/env", Some("python3"))
    );
    assert_eq!(
        shebang("#!/bin/sh\r\n"),
        some("/bin/sh\r", None),
        "a carriage return is part of the name"
    );
    assert_eq!(shebang("#!/bin/sh   \n"), some("/bin/sh", None));
    assert_eq!(shebang("#!\n"), None, "no interpreter");
    assert_eq!(shebang("#!   \n"), None);
    assert_eq!(shebang("echo hi\n"), None);
    assert_eq!(shebang("\x7fELF\x02\x01"), None);
    // No newline in the first 256 bytes: the kernel runs the interpreter
    // when its name ends inside them, with the argument cut at byte 255.
    let long = format!("#!/usr/bin/env -S tool {}", "x".repeat(400));
    let (name, arg) = shebang(&long).unwrap();
    assert_eq!(name, "/usr/bin/env");
    assert_eq!(arg.unwrap().len(), 255 - "#!/usr/bin/env ".len());
    assert_eq!(
        shebang(&format!("#!/{}", "y".repeat(400))),
        None,
        "a cut name"
    );
}

fn env_line(argument: Option<&str>) -> Result<(String, Vec<String>), EnvRefusal> {
    let argument = argument.map(OsString::from);
    env_command(argument.as_ref()).map(|(command, arguments)| {
        (
            command.into_string().unwrap(),
            arguments
                .into_iter()
                .map(|a| a.into_string().unwrap())
                .collect(),
        )
    })
}

#[test]
fn env_lines_the_host_can_do_give_the_command_and_its_arguments() {
    for (line, command, arguments) in [
        ("python3", "python3", &[][..]),
        ("-S python3 -u", "python3", &["-u"][..]),
        ("-Spython3", "python3", &[]),
        (
            "-S  node   --max-old-space-size=64 ",
            "node",
            &["--max-old-space-size=64"],
        ),
        ("-S -- python3 -u", "python3", &["-u"]),
        ("-S -S python3", "python3", &[]),
        ("--split-string=node --x", "node", &["--x"]),
        ("-S python3 -u # a comment", "python3", &["-u"]),
        ("/opt/python/bin/python3", "/opt/python/bin/python3", &[]),
    ] {
        assert_eq!(
            env_line(Some(line)),
            Ok((
                command.to_owned(),
                arguments.iter().map(|a| (*a).to_owned()).collect()
            )),
            "{line}"
        );
    }
}

/// What `env` would do and the host cannot (or what `env` itself would
/// fail at) is refused, saying which word.
#[test]
fn env_lines_the_host_cannot_do_are_refused_naming_the_word() {
    let option = |o: &str| Err(EnvRefusal::Option(o.into()));
    for (line, refusal) in [
        (Some("-i python3"), option("-i")),
        (Some("-S -i python3"), option("-i")),
        (Some("-S -u HOME python3"), option("-u")),
        (Some("-S -C / python3"), option("-C")),
        (Some("-S -vC / python3"), option("-v")),
        (Some("-S -v python3"), option("-v")),
        (Some("-S -0 python3"), option("-0")),
        (Some("-"), option("-")),
        (
            Some("-S --ignore-environment python3"),
            option("--ignore-environment"),
        ),
        (Some("-S --unset=HOME python3"), option("--unset=HOME")),
        (
            Some("-S --default-signal python3"),
            option("--default-signal"),
        ),
        (
            Some("-S PYTHONPATH=/x python3"),
            Err(EnvRefusal::Assignment("PYTHONPATH=/x".into())),
        ),
        (
            Some("-S python3 -c 'print(1)'"),
            Err(EnvRefusal::Quoting("python3 -c 'print(1)'".into())),
        ),
        (
            Some("-S ${PYTHON} -u"),
            Err(EnvRefusal::Quoting("${PYTHON} -u".into())),
        ),
        (
            Some("-S python3\\_-u"),
            Err(EnvRefusal::Quoting("python3\\_-u".into())),
        ),
        (
            Some("python3 -u"),
            Err(EnvRefusal::OneWord("python3 -u".into())),
        ),
        (None, Err(EnvRefusal::NoCommand)),
        (Some("-S"), Err(EnvRefusal::NoCommand)),
        (Some("-S # only a comment"), Err(EnvRefusal::NoCommand)),
        (Some("-S --"), Err(EnvRefusal::NoCommand)),
    ] {
        assert_eq!(env_line(line), refusal, "{line:?}");
    }
    // The reason and the remedy a person reads.
    let refused = EnvRefusal::Option("-i".into());
    assert!(refused.detail().contains("`-i`"), "{}", refused.detail());
    assert!(refused.remedy().contains("-S CMD"), "{}", refused.remedy());
    assert!(
        refused.remedy().contains("effects.spawns"),
        "{}",
        refused.remedy()
    );
}

/// A folder on a PATH holding `tool`, a shell script that prints how it
/// was started: `$0` and its arguments.
fn tool_on_path(dir: &Path) -> OsString {
    script(
        &dir.join("bin/tool"),
        "#!/bin/sh\nfor a in \"$0\" \"$@\"; do printf '[%s]' \"$a\"; done\n",
    );
    std::env::join_paths([
        dir.join("empty"),
        dir.join("bin"),
        PathBuf::from("/usr/bin"),
    ])
    .unwrap()
}

/// What running `command` prints, with PATH `path` and nothing else.
fn output(command: &mut Command, path: &OsStr) -> String {
    let out = command.env_clear().env("PATH", path).output().unwrap();
    assert!(out.status.success(), "{command:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The differential test: for every line the host accepts, executing what
/// [`direct`] gives prints exactly what executing the entry (the kernel
/// running `env`, `env` running the command) prints.
#[test]
fn the_host_executes_what_env_would_with_the_same_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let path = tool_on_path(dir.path());
    let wrapper = script(
        &dir.path().join("wrapper"),
        "#!/usr/bin/env -S tool --from-wrapper\n",
    );
    let lines = [
        "#!/usr/bin/env tool".to_owned(),
        "#!/usr/bin/env -S tool -u --flag=1".to_owned(),
        "#! /usr/bin/env   -Stool\tx ".to_owned(),
        "#!/bin/env -S -- tool y".to_owned(),
        "#!/usr/bin/env --split-string=tool z # comment".to_owned(),
        format!("#!{} --to-wrapper", wrapper.display()),
    ];
    for (at, line) in lines.iter().enumerate() {
        let entry = script(
            &dir.path().join(format!("m{at}/entry")),
            &format!("{line}\n"),
        );
        let launch = direct(&entry, Some(&path))
            .unwrap_or_else(|e| panic!("{line}: {e:?}"))
            .unwrap_or_else(|| panic!("{line}: no launch"));
        let by_env = output(&mut Command::new(&entry), &path);
        let by_host = output(
            Command::new(&launch.program)
                .arg0(&launch.argv[0])
                .args(&launch.argv[1..]),
            &path,
        );
        assert_eq!(by_host, by_env, "{line}: {launch:?}");
        assert!(by_env.contains(&entry.display().to_string()), "{by_env}");
        assert_eq!(
            launch.canonical,
            std::fs::canonicalize(dir.path().join("bin/tool")).unwrap()
        );
    }
}

#[test]
fn an_entry_that_runs_no_env_is_executed_itself() {
    let dir = tempfile::tempdir().unwrap();
    let path = tool_on_path(dir.path());
    let sh = script(&dir.path().join("sh-module"), "#!/bin/sh\necho hi\n");
    let nested = script(&dir.path().join("nested"), &format!("#!{}\n", sh.display()));
    for entry in [
        sh,
        nested,
        PathBuf::from("/bin/sh"),
        dir.path().join("missing"),
    ] {
        assert_eq!(direct(&entry, Some(&path)), Ok(None), "{}", entry.display());
    }
}

#[test]
fn a_command_missing_from_path_is_refused_naming_the_line_and_path() {
    let dir = tempfile::tempdir().unwrap();
    let entry = script(
        &dir.path().join("m"),
        "#!/usr/bin/env -S no-such-interpreter -u\n",
    );
    let refused = direct(&entry, Some(OsStr::new("/usr/bin:/bin"))).unwrap_err();
    assert!(
        refused
            .reason
            .contains("#!/usr/bin/env -S no-such-interpreter -u")
            && refused.reason.contains("no-such-interpreter")
            && refused.reason.contains("/usr/bin:/bin")
            && refused.reason.contains("declares no spawns"),
        "{refused:?}"
    );
    let refused = direct(
        &script(&dir.path().join("i"), "#!/usr/bin/env -i python3\n"),
        None,
    )
    .unwrap_err();
    assert!(refused.reason.contains("`-i`"), "{refused:?}");
    assert!(
        refused.remedy.contains("#!/usr/bin/env -S CMD"),
        "{refused:?}"
    );
    let error = ConfineError::from(refused);
    assert!(matches!(error, ConfineError::Unconfined { .. }), "{error}");
}

/// Only an exec-gated call gets a launch; the one it gets must execute a
/// file the chain grants.
#[test]
fn only_an_exec_gated_call_is_launched_and_only_within_its_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = tool_on_path(dir.path());
    let entry = script(&dir.path().join("m"), "#!/usr/bin/env -S -i tool\n");
    let spawning = Flavour {
        network: false,
        exec_gated: false,
    };
    assert!(
        matches!(for_call(&entry, spawning), Ok(None)),
        "a call that may spawn runs env itself, options and all"
    );
    let entry = script(&dir.path().join("ok"), "#!/usr/bin/env tool\n");
    let launch = direct(&entry, Some(&path)).unwrap().unwrap();
    let chain = interpreter::resolve(&entry, &[], &|| Some(path.clone()));
    assert_eq!(
        within(Some(&launch), &chain).map_err(|e| e.to_string()),
        Ok(())
    );
    assert_eq!(
        within(None, &Chain::default()).map_err(|e| e.to_string()),
        Ok(())
    );
    let err = within(Some(&launch), &Chain::default()).unwrap_err();
    assert!(err.to_string().contains("interpreter chain"), "{err}");
}
