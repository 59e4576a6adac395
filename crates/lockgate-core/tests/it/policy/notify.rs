//! `[[notify]]`: the error table (line, field, text; a URL's password never in a message),
//! the TOML round trip, and the secret rules (shown as `***`, kept when put back).

use lockgate_core::policy::*;
use rstest::rstest;

#[rstest]
#[case::neither_url_nor_smtp(
    "[[notify]]\nname = \"ops\"\n",
    1,
    "notify[0]",
    "expected url = \"https://..\" (a webhook) or smtp = \"smtp://host:port\" (e-mail)"
)]
#[case::both(
    "[[notify]]\nname = \"ops\"\nurl = \"https://h\"\nsmtp = \"smtp://h\"\nto = [\"a@h\"]\n",
    4,
    "notify[0].smtp",
    "expected either url (a webhook) or smtp (e-mail), got both"
)]
#[case::bad_scheme_hides_the_password(
    "[[notify]]\nname = \"ops\"\nurl = \"ftp://u:hunter2@h/x\"\n",
    3,
    "notify[0].url",
    "expected an http:// or https:// URL with a host, got \"ftp://u:***@h/x\""
)]
#[case::bad_port(
    "[[notify]]\nname = \"ops\"\nurl = \"http://h:99999/x\"\n",
    3,
    "notify[0].url",
    "expected a port number after the host, got \"http://h:99999/x\""
)]
#[case::smtp_without_to(
    "[[notify]]\nname = \"mail\"\nsmtp = \"smtp://mail:587\"\n",
    1,
    "notify[0].to",
    "expected at least one recipient beside smtp, got none"
)]
#[case::smtp_bad_address(
    "[[notify]]\nname = \"mail\"\nsmtp = \"smtp://mail:587\"\nto = [\"ops\"]\n",
    4,
    "notify[0].to[0]",
    "expected an e-mail address such as ops@example.org, got \"ops\""
)]
#[case::smtp_bad_url(
    "[[notify]]\nname = \"mail\"\nsmtp = \"smtps://u:pw@mail:465\"\nto = [\"a@h\"]\n",
    3,
    "notify[0].smtp",
    "expected smtp://[user[:password]@]host[:port], got \"smtps://u:***@mail:465\""
)]
#[case::to_on_a_webhook(
    "[[notify]]\nname = \"ops\"\nurl = \"https://h\"\nto = [\"a@h\"]\n",
    4,
    "notify[0].to",
    "to is for e-mail targets (smtp = ..), expected it only beside smtp"
)]
#[case::two_secrets(
    "[[notify]]\nname = \"ops\"\nurl = \"https://h\"\nsecret_file = \"/s\"\nsecret_env = \"S\"\n",
    5,
    "notify[0].secret_env",
    "expected either secret_file or secret_env, got both"
)]
#[case::relative_secret_file(
    "[[notify]]\nname = \"ops\"\nurl = \"https://h\"\nsecret_file = \"ops.secret\"\n",
    4,
    "notify[0].secret_file",
    "expected an absolute path, got \"ops.secret\""
)]
#[case::bad_match(
    "[[notify]]\nname = \"ops\"\nurl = \"https://h\"\nmatch = \"outcome in ()\"\n",
    4,
    "notify[0].match",
    "invalid job selector \"outcome in ()\""
)]
#[case::bad_timeout(
    "[[notify]]\nname = \"ops\"\nurl = \"https://h\"\ntimeout = \"0s\"\n",
    4,
    "notify[0].timeout",
    "expected a duration greater than zero, got \"0s\""
)]
#[case::negative_retries(
    "[[notify]]\nname = \"ops\"\nurl = \"https://h\"\nretries = -1\n",
    4,
    "notify[0].retries",
    "expected a whole number >= 0, got -1"
)]
#[case::name_twice(
    "[[notify]]\nname = \"ops\"\nurl = \"https://h\"\n\n[[notify]]\nname = \"ops\"\nurl = \"https://g\"\n",
    6,
    "notify[1].name",
    "notify name \"ops\" is already used by notify[0], expected unique names"
)]
#[case::unknown_key(
    "[[notify]]\nname = \"ops\"\nurl = \"https://h\"\nsecret = \"x\"\n",
    4,
    "notify[0].secret",
    "unknown key, expected one of `name`, `url`, `smtp`"
)]
fn rejects(#[case] text: &str, #[case] line: usize, #[case] field: &str, #[case] needle: &str) {
    let e = Policy::from_toml(text, Some("p.toml")).expect_err(text);
    assert!(e.message.contains(needle), "{e}\n(wanted {needle:?})");
    assert_eq!((e.line, e.field.as_str()), (Some(line), field), "{e}");
    assert!(
        !e.to_string().contains("hunter2") && !e.to_string().contains(":pw@"),
        "{e}"
    );
}

const DOC: &str = r#"
[[notify]]
name = "ops"
url = "https://lockgate:hunter2@hooks.example/lockgate"
secret_file = "/etc/lockgate/ops.secret"
match = "outcome in (failed, lost, expired)"
timeout = "5s"
retries = 3

[[notify]]
name = "mail"
smtp = "smtp://mail.example:587"
to = ["ops@example.org", "oncall@example.org"]
from = "lockgate@example.org"
starttls = false
secret_env = "SMTP_PASSWORD"
"#;

#[test]
fn targets_validate_with_their_defaults_and_round_trip() {
    let p = Policy::from_toml(DOC, None).unwrap();
    assert_eq!(p.notify.len(), 2);
    let ops = &p.notify[0];
    assert_eq!(
        ops.via,
        NotifyVia::Webhook {
            url: "https://lockgate:hunter2@hooks.example/lockgate".into()
        }
    );
    assert_eq!(
        ops.secret,
        Some(SecretRef::File("/etc/lockgate/ops.secret".into()))
    );
    assert_eq!((ops.timeout.as_secs(), ops.retries), (5, 3));
    let mail = &p.notify[1];
    assert!(matches!(
        &mail.via,
        NotifyVia::Smtp { host, port: 587, starttls: false, to, .. } if host == "mail.example" && to.len() == 2
    ));
    assert_eq!(mail.matcher.text(), DEFAULT_NOTIFY_MATCH);
    assert_eq!(
        (mail.timeout, mail.retries),
        (DEFAULT_NOTIFY_TIMEOUT, DEFAULT_NOTIFY_RETRIES)
    );
    assert_eq!(
        mail.secret.as_ref().unwrap().describe(),
        "secret_env SMTP_PASSWORD"
    );
    let again = Policy::from_toml(&p.to_toml_string(), None).unwrap();
    assert_eq!(again.raw, p.raw, "{}", p.to_toml_string());
    assert!(
        p.to_toml_string().contains("hunter2"),
        "the store's copy keeps the password"
    );
}

#[test]
fn a_url_password_is_served_as_stars_and_a_document_put_back_with_stars_keeps_it() {
    let active = Policy::from_toml(DOC, None).unwrap();
    let shown = active.to_json_value().to_string();
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(
        shown.contains("https://lockgate:***@hooks.example/lockgate"),
        "{shown}"
    );
    // What GET showed, put back: the stored password stays.
    let back = Policy::from_json(&shown).unwrap();
    assert!(back.has_masked_secrets());
    let kept = back.keep_secrets(&active).unwrap();
    assert_eq!(kept.raw, active.raw);
    assert!(active.diff(&kept).is_empty());
    // A changed password is a change, and the diff does not show it.
    let changed = Policy::from_toml(&DOC.replace("hunter2", "swordfish"), None).unwrap();
    let diff = active.diff(&changed);
    assert_eq!(
        diff,
        vec!["notify \"ops\": the URL's password changed".to_string()]
    );
    // Stars with another host than the stored URL's are refused, naming the field.
    let moved = Policy::from_json(&shown.replace("hooks.example", "elsewhere.example")).unwrap();
    let e = moved.keep_secrets(&active).unwrap_err();
    assert_eq!(e.field, "notify[0].url");
    assert!(e.message.contains("write the password"), "{e}");
}
