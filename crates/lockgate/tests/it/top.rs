//! `lockgate top` in a real terminal: tmux on a private socket, a real server, real
//! `lockgate run` holders, keys sent with `send-keys` and the screen read with
//! `capture-pane`.

use crate::harness::*;
use lockgate_core::JobState;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// A tmux server of its own (`tmux -L`), killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// A 160x48 session running a plain `sh` in `dir`.
    fn start(dir: &Path) -> Tmux {
        let t = Tmux {
            socket: format!("lockgate-top-{}-{}", std::process::id(), free_port()),
        };
        let ok = t
            .cmd(&["new-session", "-d", "-x", "160", "-y", "48", "-s", "top"])
            .arg("-c")
            .arg(dir)
            .arg("env PS1='shell$ ' sh")
            .status()
            .unwrap();
        assert!(ok.success(), "tmux new-session failed");
        t
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket, "-f", "/dev/null"]).args(args);
        c
    }

    /// `send-keys`: tmux key names (`Enter`, `Escape`) or, with `literal`, text.
    fn keys(&self, keys: &[&str], literal: bool) {
        let mut c = self.cmd(&["send-keys", "-t", "top"]);
        if literal {
            c.arg("-l");
        }
        assert!(c.args(keys).status().unwrap().success());
    }

    /// Whether the pane shows its cursor (`#{cursor_flag}`).
    fn cursor_shown(&self) -> bool {
        let o = self
            .cmd(&["display-message", "-p", "-t", "top", "#{cursor_flag}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim() == "1"
    }

    fn screen(&self) -> String {
        let o = self
            .cmd(&["capture-pane", "-p", "-t", "top"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Waits until the screen satisfies `f`; the screen then, or a panic showing it.
    fn until(&self, what: &str, f: impl Fn(&str) -> bool) -> String {
        let mut last = String::new();
        let ok = eventually(Duration::from_secs(20), || {
            last = self.screen();
            f(&last)
        });
        assert!(ok, "{what}: the screen was\n{last}");
        last
    }

    /// The pid of the process the pane's shell runs in the foreground (`lockgate top`).
    fn child_of_shell(&self) -> Option<u32> {
        let o = self
            .cmd(&["display-message", "-p", "-t", "top", "#{pane_pid}"])
            .output()
            .unwrap();
        let shell = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let children =
            std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).ok()?;
        children.split_whitespace().next()?.parse().ok()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]).status();
    }
}

/// Whether the shell waits at its prompt: the last line written is a bare `shell$`.
fn at_prompt(screen: &str) -> bool {
    let last = screen.lines().rev().find(|l| !l.trim().is_empty());
    last.is_some_and(|l| l.trim_end() == "shell$")
}

/// The line of the screen that starts (after the frame) with `name`.
fn line_of<'a>(screen: &'a str, name: &str) -> Option<&'a str> {
    screen.lines().find(|l| {
        l.trim_start_matches(['│', ' '])
            .starts_with(&format!("{name} "))
    })
}

/// `used` and `limit` of a scope, from the server's own `/metrics`.
fn scope_numbers(s: &Srv, scope: &str) -> (u64, u64) {
    let text = s.admin().metrics().unwrap();
    let value = |series: &str| -> u64 {
        let prefix = format!("{series}{{scope=\"{scope}\"}} ");
        let line = text.lines().find_map(|l| l.strip_prefix(&prefix));
        line.unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
            .trim()
            .parse()
            .unwrap()
    };
    (
        value("lockgate_scope_running"),
        value("lockgate_scope_limit"),
    )
}

fn wait_state(s: &Srv, id: u64, state: JobState) {
    let admin = s.admin();
    let ok = eventually(Duration::from_secs(20), || {
        admin.job(id).is_ok_and(|j| j.state == state)
    });
    assert!(ok, "job {id} never became {state}");
}

const POLICY: &str =
    "[global]\nmax_running = 4\n\n[[limit]]\nname = \"repo\"\nper = [\"repo\"]\nmax = 1\n";

/// A `lockgate run` holder of a `repo=main` backup that ends when the file `go` appears.
fn holder(s: &Srv, go: &str) -> std::process::Child {
    let script = format!("while [ ! -e {go} ]; do sleep 0.05; done");
    s.run(&["--attr", "repo=main", "--", "sh", "-c", &script])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn top_shows_the_real_scopes_explains_a_waiting_job_and_restores_the_terminal() {
    let mut s = Srv::start(POLICY);
    let mut first = holder(&s, "go1");
    wait_state(&s, 1, JobState::Running);
    let mut second = holder(&s, "go2");
    wait_state(&s, 2, JobState::Queued);

    let t = Tmux::start(s.dir.path());
    t.until("the shell's prompt", at_prompt);
    let line = format!(
        "LOCKGATE_SERVER={} LOCKGATE_TOKEN={} {BIN} top",
        s.url(),
        s.token
    );
    t.keys(&[&line], true);
    t.keys(&["Enter"], false);

    // The overview: each scope at the numbers the server's /metrics gives.
    let repo = "limit:repo[repo=main]";
    let (used, limit) = scope_numbers(&s, repo);
    assert_eq!((used, limit), (1, 1));
    // tmux may capture the pane while a frame is half written (the title new, a panel
    // below it still the frame before), so wait for every line this part reads.
    let screen = t.until(
        "the overview with the repo scope and the waiting job",
        |x| {
            line_of(x, repo).is_some_and(|l| l.contains(&format!(" {used}/{limit} running {used}")))
                && x.contains("oldest waiting: job 2 backup repo=main by admin")
        },
    );
    let (gused, glimit) = scope_numbers(&s, "global");
    let global = line_of(&screen, "global").expect("the global scope");
    assert!(global.contains(&format!(" {gused}/{glimit} ")), "{screen}");
    assert!(screen.contains("connected"), "{screen}");
    assert!(!t.cursor_shown(), "top hides the cursor while it draws");
    assert!(
        screen.contains("oldest waiting: job 2 backup repo=main by admin"),
        "{screen}"
    );
    // ... with why it waits, in the server's words.
    let why = s.admin().explain(2).unwrap();
    let reason = why
        .reasons
        .iter()
        .find(|r| r.scope.as_deref() == Some(repo))
        .expect("the repo limit holds job 2")
        .clone();
    let oldest = line_of(&screen, "oldest").expect("the oldest waiting job");
    assert!(
        oldest.contains(&reason.text),
        "{:?} in {oldest}",
        reason.text
    );

    // The queue lists the waiting job; `s` keeps only queued jobs, Enter explains it.
    t.keys(&["2"], true);
    t.until("the queue", |x| x.contains("2 of 2 jobs"));
    t.keys(&["s"], true);
    let screen = t.until("the queued filter", |x| x.contains("1 of 2 jobs"));
    assert!(
        screen.contains("queued") && screen.contains("waiting"),
        "{screen}"
    );
    t.keys(&["Enter"], false);
    let screen = t.until("job 2's explanation", |x| {
        x.contains("explain job 2") && x.contains("held by jobs 1")
    });
    assert!(
        screen.contains(&reason.text),
        "{:?} in\n{screen}",
        reason.text
    );
    assert!(screen.contains(&format!("{repo} (")), "{screen}");

    // Back to the overview; the first job ends and the screen follows with no key pressed.
    t.keys(&["Escape"], false);
    // Wait for the queue first: an Esc and a key that arrive together read as Alt+key.
    t.until("the queue again", |x| x.contains("1 of 2 jobs"));
    t.keys(&["1"], true);
    t.until("the overview again", |x| {
        x.contains("oldest waiting: job 2")
    });
    std::fs::write(s.path("go1"), "").unwrap();
    assert!(first.wait().unwrap().success());
    wait_state(&s, 2, JobState::Running);
    let screen = t.until("the redraw after job 1 ended", |x| {
        x.contains("oldest waiting: none") && x.contains("job 1 backup repo=main")
    });
    assert!(screen.contains("finished"), "{screen}");
    std::fs::write(s.path("go2"), "").unwrap();
    assert!(second.wait().unwrap().success());
    // A per-value scope is listed while in use only, as the server lists it.
    let screen = t.until("nothing running", |x| {
        line_of(x, repo).is_none() && x.contains(" 0 active ")
    });
    let (gused, glimit) = scope_numbers(&s, "global");
    assert_eq!(gused, 0);
    let global = line_of(&screen, "global").expect("the global scope");
    assert!(global.contains(&format!(" {gused}/{glimit} ")), "{screen}");

    // The server goes away and comes back: top says so, then reconnects by itself.
    s.kill9();
    t.until("the lost server", |x| x.contains("disconnected, retrying"));
    s.spawn();
    t.until("the server back", |x| {
        x.contains(" connected ") && !x.contains("disconnected")
    });

    // `q` leaves and the shell works again with its echo on: the terminal is restored.
    t.keys(&["q"], true);
    t.until("the shell after q", |x| {
        !x.contains("recent events") && at_prompt(x)
    });
    t.keys(&["echo back-$((40+2))"], true);
    t.keys(&["Enter"], false);
    t.until("the shell's answer", |x| x.contains("\nback-42"));
    assert!(t.cursor_shown(), "the cursor is back");

    // SIGTERM is a way out too.
    t.until("the prompt again", at_prompt);
    t.keys(&[&line], true);
    t.keys(&["Enter"], false);
    t.until("top again", |x| x.contains("recent events"));
    let pid = t.child_of_shell().expect("top runs under the shell");
    signal(pid, rustix::process::Signal::TERM);
    assert!(eventually(Duration::from_secs(10), || gone(pid)));
    t.until("the shell after SIGTERM", |x| {
        !x.contains("recent events") && at_prompt(x)
    });
    t.keys(&["echo term-$((40+3))"], true);
    t.keys(&["Enter"], false);
    let screen = t.until("the shell's answer after SIGTERM", |x| {
        x.contains("\nterm-43")
    });
    assert!(!screen.contains("recent events"), "{screen}");
    assert!(t.cursor_shown(), "the cursor is back after SIGTERM");
}

#[test]
fn top_refuses_a_bad_token_and_a_stdout_that_is_no_terminal() {
    let s = Srv::start("");
    let o = s.cli(&["--token", "nope", "top"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert_eq!(o.status.code(), Some(77), "{err}");
    assert!(err.contains("the server refused the token"), "{err}");
    let o = s.cli(&["top"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("lockgate top draws on a terminal"), "{err}");
    assert!(o.stdout.is_empty(), "nothing drawn into a pipe");
}
