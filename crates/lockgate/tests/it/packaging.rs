//! What the package ships (packaging/): the default policy passes `policy check`, the
//! sample agent.toml loads with the agent's own loader, the units keep their hardening and
//! start the binary with flags it has.

use crate::harness::BIN;
use std::path::PathBuf;
use std::process::Command;

fn packaging(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../packaging")
        .join(name)
}

fn lockgate(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

#[test]
fn the_default_policy_is_valid() {
    let path = packaging("lockgate.toml");
    let (code, stdout, stderr) =
        lockgate(&["policy", "check", "-o", "json", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["valid"], true, "{v}");
}

#[test]
fn the_sample_agent_config_loads() {
    let config = lockgate_agent::AgentConfig::load(&packaging("agent.toml")).unwrap();
    let kinds: Vec<String> = config.kinds().into_iter().collect();
    assert_eq!(kinds, ["backup", "prune"]);
    // The sample's kinds are the ones the default policy names, so they get their own
    // `kind` label in /metrics.
    let policy = std::fs::read_to_string(packaging("lockgate.toml")).unwrap();
    for k in &kinds {
        assert!(policy.contains(&format!("[kinds.{k}]")), "{k}");
    }
}

#[test]
fn the_units_are_hardened_and_start_with_flags_that_exist() {
    for (unit, sub) in [
        ("lockgate-server.service", "server"),
        ("lockgate-agent.service", "agent"),
    ] {
        let text = std::fs::read_to_string(packaging("systemd").join(unit)).unwrap();
        for line in [
            "User=lockgate",
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "PrivateTmp=yes",
            "PrivateDevices=yes",
        ] {
            assert!(text.lines().any(|l| l == line), "{unit}: {line} missing");
        }
        let exec = text
            .lines()
            .find_map(|l| l.strip_prefix("ExecStart="))
            .unwrap();
        let argv: Vec<&str> = exec.split_whitespace().collect();
        assert_eq!(&argv[..2], ["/usr/bin/lockgate", sub], "{unit}");
        let (code, help, _) = lockgate(&[sub, "--help"]);
        assert_eq!(code, 0);
        for flag in argv.iter().filter(|a| a.starts_with("--")) {
            assert!(
                help.contains(&format!("{flag} ")),
                "{unit}: {flag} is not a flag of `lockgate {sub}`"
            );
        }
    }
    let server = std::fs::read_to_string(packaging("systemd/lockgate-server.service")).unwrap();
    assert!(server
        .lines()
        .any(|l| l == "ReadWritePaths=/var/lib/lockgate"));
    assert!(server.lines().any(|l| l == "ProtectHome=yes"));
}

#[test]
fn completions_for_the_three_shells() {
    for (shell, needle) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef lockgate"),
        ("fish", "complete -c lockgate"),
    ] {
        let (code, out, err) = lockgate(&["completions", shell]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains(needle) && out.contains("schedule"), "{shell}");
    }
}
