use super::*;

#[test]
fn a_rendered_file_parses_back_to_the_same_configuration() {
    let mut config = ManagedConfig::default();
    config.modules.insert(
        "sessions".into(),
        ManagedModule {
            source_roots: [("transcripts".to_owned(), PathBuf::from("/srv/sessions"))].into(),
            approval: vec![ModuleRule {
                name: Some("no writes".into()),
                capability: None,
                effect: Some(EffectClass::Writes),
                principal: None,
                scope: None,
                without_scope: None,
                decision: PolicyVerdict::Deny,
            }],
        },
    );
    config
        .modules
        .insert("empty".into(), ManagedModule::default());
    let text = config.render(Path::new("/etc/modhost.toml"));
    let back = ManagedConfig::parse(&text).unwrap();
    config.modules.remove("empty");
    assert_eq!(back, config, "{text}");
}

/// The attack: an entry's root reaching another module that declares
/// a root of the same name, or a hand-made key that is no module id.
#[test]
fn a_managed_root_is_granted_to_its_own_module_only() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[source_roots]\nshared = \"/srv/shared\"\n").unwrap();
    let managed = dir.path().join(crate::home::MANAGED_CONFIG_FILE);
    std::fs::write(
        &managed,
        "[modules.a]\nsource_roots = { private = \"/srv/a\", shared = \"/srv/shared\", both = \"/srv/both\" }\n[modules.b]\nsource_roots = { both = \"/srv/both\" }\n",
    )
    .unwrap();
    let loaded = crate::config::Config::load(&config).unwrap();
    let names = |module: &str| {
        loaded
            .source_roots_for(module)
            .into_keys()
            .collect::<Vec<_>>()
    };
    assert_eq!(names("a"), ["both", "private", "shared"]);
    assert_eq!(names("b"), ["both", "shared"]);
    assert_eq!(names("c"), ["shared"]);

    for key in ["\"*\"", "modhost", "\"../x\""] {
        std::fs::write(
            &managed,
            format!("[modules.{key}]\nsource_roots = {{ r = \"/r\" }}\n"),
        )
        .unwrap();
        let err = crate::config::Config::load(&config)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a module id"), "{key}: {err}");
    }
}

#[test]
fn a_rule_naming_a_module_or_tool_is_refused() {
    for key in ["module = \"other\"", "tool = \"other__*\""] {
        let text = format!("[[modules.a.approval]]\n{key}\ndecision = \"allow\"\n");
        let err = ManagedConfig::parse(&text).unwrap_err();
        assert!(err.contains("unknown field"), "{err}");
    }
}
