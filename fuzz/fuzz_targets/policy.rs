//! The policy parser (`lockgate_core::policy`): every input is read both as TOML
//! (`Policy::from_toml`) and as JSON (`Policy::from_json`, what `PUT /v1/policy` takes).
//!
//! Properties for a policy that validates:
//! - written back as TOML (`to_toml_string`, the writer `policy show` and the server's
//!   config file use) it re-parses to an equal policy, and so does its JSON form
//!   (`to_json_value`, what `GET /v1/policy` answers);
//! - it has no differences from itself or from its re-parsed copy (`diff`).
//!
//! For a rejected document: the error has a message, and a line (when given) lies inside
//! the text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockgate_core::Policy;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for (form, parsed) in [
        ("TOML", Policy::from_toml(text, Some("fuzz.toml"))),
        ("JSON", Policy::from_json(text)),
    ] {
        match parsed {
            Ok(p) => round_trips(form, text, &p),
            Err(e) => {
                assert!(!e.message.is_empty(), "{form} {text:?}: {e:?}");
                if let Some(line) = e.line {
                    let lines = text.split('\n').count();
                    assert!(
                        (1..=lines).contains(&line),
                        "{form} {text:?}: line {line} of {lines}: {e}"
                    );
                }
            }
        }
    }
});

fn round_trips(form: &str, text: &str, p: &Policy) {
    assert!(p.diff(p).is_empty(), "{form} {text:?}: differs from itself");
    let toml = p.to_toml_string();
    let again = Policy::from_toml(&toml, Some("written.toml")).unwrap_or_else(|e| {
        panic!("{form} {text:?} validated, but its TOML does not:\n{toml}\n{e}")
    });
    assert_eq!(&again, p, "{form} {text:?}: TOML round trip\n{toml}");
    assert!(
        p.diff(&again).is_empty(),
        "{form} {text:?}: {:?}",
        p.diff(&again)
    );
    let json = p.to_json_value().to_string();
    let again = Policy::from_json(&json).unwrap_or_else(|e| {
        panic!("{form} {text:?} validated, but its JSON does not:\n{json}\n{e}")
    });
    assert_eq!(&again, p, "{form} {text:?}: JSON round trip\n{json}");
}
