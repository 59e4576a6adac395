//! `lockgate rpo` and `lockgate rpo forget` against a real server process, with jobs run
//! by `lockgate run` (a success and a failure).

use crate::harness::*;
use serde_json::Value;

const POLICY: &str = "[[rpo]]\nname = \"vms\"\nmatch = \"kind=backup\"\nper = [\"group\"]\nmax_age = \"1h\"\n\n[[rpo]]\nmatch = \"kind=verify\"\nmax_age = \"2d\"\n";

fn out(c: &mut std::process::Command) -> String {
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn rpo_lists_each_value_with_its_last_success_and_forget_retires_one() {
    let s = Srv::start(POLICY);
    out(&mut s.run(&["--kind", "backup", "--attr", "group=vm/100", "--", "true"]));
    let failed = s
        .run(&["--kind", "backup", "--attr", "group=vm/101", "--", "false"])
        .output()
        .unwrap();
    assert!(!failed.status.success());
    out(&mut s.run(&["--kind", "verify", "--", "true"]));

    let table = out(&mut s.cli(&["rpo"]));
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("RULE") && lines[0].contains("LAST SUCCESS"),
        "{table}"
    );
    let row = |label: &str| {
        lines
            .iter()
            .find(|l| l.split_whitespace().nth(1) == Some(label))
            .unwrap_or_else(|| panic!("no {label} in\n{table}"))
            .to_string()
    };
    assert!(
        row("vm/100").contains(" ok ") && row("vm/100").contains("1h00m"),
        "{table}"
    );
    let never = row("vm/101");
    assert!(
        never.contains(" - ") && never.contains(" new ") && never.contains("(failed)"),
        "{table}"
    );
    assert!(
        row("-").starts_with("kind=verify") && row("-").contains("2d00h"),
        "{table}"
    );

    let json: Value = serde_json::from_str(&out(&mut s.cli(&["-o", "json", "rpo", "ls"]))).unwrap();
    assert_eq!(json["rules"][0]["name"], "vms");
    assert_eq!(json["rules"][0]["values"][0]["value"]["group"], "vm/100");
    assert_eq!(json["rules"][0]["values"][0]["status"], "ok");
    assert!(json["rules"][0]["values"][0]["last_success"].is_string());
    assert_eq!(json["rules"][1]["name"], "kind=verify");

    let gone = out(&mut s.cli(&["rpo", "forget", "vms", "vm/101"]));
    assert_eq!(gone.trim(), "forgot vms vm/101");
    let gone = out(&mut s.cli(&["rpo", "forget", "kind=verify"]));
    assert_eq!(gone.trim(), "forgot kind=verify -");
    let unknown = s.cli(&["rpo", "forget", "vms", "vm/101"]).output().unwrap();
    assert!(!unknown.status.success());
    let err = String::from_utf8_lossy(&unknown.stderr);
    assert!(err.contains("tracks no value \"vm/101\""), "{err}");
    let table = out(&mut s.cli(&["rpo"]));
    assert!(
        table.contains("vm/100") && !table.contains("vm/101"),
        "{table}"
    );
}
