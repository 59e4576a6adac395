//! The exit codes of every `lockgate` command, in one table ([`Exit`]); docs/api.md
//! ("Exit codes") prints the same table and a test holds the two together.
//!
//! # Invariants
//! - Every command ends through [`Exit`] (or, for `lockgate run`, with its command's own
//!   status), so one cause gives one code whatever the command: an unreachable server is
//!   69 and a refused token 77 for `job ls` as for `lockgate run`.
//! - 77 means "another token is needed": no token, an unknown one (401), or a role that
//!   may not make the call (403 without a field). A 403 that names a field refuses a
//!   value of the request (a priority above the owner's `max_priority`): changing the
//!   request helps, a new token does not, so it is not 77.

use lockgate_client::ClientError;
use lockgate_core::JobState;
use std::process::ExitCode;

/// One exit code and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: done as asked.
    Success,
    /// 1: the command failed and said why on stderr; `job wait`: the job failed.
    Failure,
    /// 2: usage: a bad flag or argument; `lockgate run`: the server refused the request
    /// (a 4xx such as an unknown kind or a priority above the owner's `max_priority`).
    Usage,
    /// 69: the server could not be reached (`lockgate run`: within `--connect-timeout`).
    Unreachable,
    /// 75: the job did not run to its end: expired, cancelled or its lease lost.
    NotRun,
    /// 77: the token was refused: none was found, the server does not know it, or its role
    /// may not make the call.
    Token,
    /// 130: interrupted (`lockgate run` before the command started, a second signal to
    /// `lockgate agent`, `lockgate demo`).
    Interrupted,
}

impl Exit {
    /// Every code, in the order of the documented table.
    pub const ALL: [Exit; 7] = [
        Exit::Success,
        Exit::Failure,
        Exit::Usage,
        Exit::Unreachable,
        Exit::NotRun,
        Exit::Token,
        Exit::Interrupted,
    ];

    /// The number the process exits with.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::Unreachable => 69,
            Exit::NotRun => 75,
            Exit::Token => 77,
            Exit::Interrupted => 130,
        }
    }

    /// Whether the server refused the token rather than the request (see the header).
    pub fn is_token_refusal(e: &ClientError) -> bool {
        match e {
            ClientError::Api { status: 401, .. } => true,
            ClientError::Api {
                status: 403,
                detail,
            } => detail.code == "forbidden" && detail.field.is_none(),
            _ => false,
        }
    }

    /// The code of a command that failed with `e`: 69 unreachable, 77 a refused token,
    /// else 1.
    pub fn of_client_error(e: &ClientError) -> Exit {
        match e {
            ClientError::Unreachable { .. } => Exit::Unreachable,
            e if Exit::is_token_refusal(e) => Exit::Token,
            _ => Exit::Failure,
        }
    }

    /// The code of a command that failed with `err`: that of the [`ClientError`] in its
    /// chain, else 1.
    pub fn of_error(err: &anyhow::Error) -> Exit {
        err.chain()
            .find_map(|e| e.downcast_ref::<ClientError>())
            .map_or(Exit::Failure, Exit::of_client_error)
    }

    /// `job wait`: 0 for a job that succeeded or has not ended (the wait ended first), 1
    /// for one that failed, 75 for one that did not run to its end.
    pub fn of_job(state: JobState) -> Exit {
        match state {
            JobState::Failed => Exit::Failure,
            JobState::Cancelled | JobState::Lost | JobState::Expired => Exit::NotRun,
            _ => Exit::Success,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockgate_api::ErrorDetail;

    fn api(status: u16, code: &str, field: Option<&str>) -> ClientError {
        ClientError::Api {
            status,
            detail: ErrorDetail {
                code: code.into(),
                message: "m".into(),
                field: field.map(str::to_string),
                line: None,
                leader: None,
            },
        }
    }

    #[test]
    fn a_refused_priority_is_not_a_refused_token() {
        assert_eq!(
            Exit::of_client_error(&api(403, "forbidden", Some("priority"))),
            Exit::Failure
        );
        assert_eq!(
            Exit::of_client_error(&api(403, "forbidden", None)),
            Exit::Token
        );
        assert_eq!(
            Exit::of_client_error(&api(401, "unauthorized", None)),
            Exit::Token
        );
        assert_eq!(
            Exit::of_client_error(&api(409, "already_ended", None)),
            Exit::Failure
        );
        let wrapped = anyhow::Error::from(api(401, "unauthorized", None)).context("job ls");
        assert_eq!(Exit::of_error(&wrapped), Exit::Token);
    }

    /// docs/api.md holds the same table: one row `| N | ... |` per code, in this order.
    #[test]
    fn the_documented_table_is_this_one() {
        let doc = include_str!("../../../../docs/api.md");
        let (_, section) = doc.split_once("### Exit codes").expect("the section");
        let rows: Vec<u8> = section
            .lines()
            .skip_while(|l| !l.starts_with("| code"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .filter_map(|l| l.trim_matches('|').split('|').next()?.trim().parse().ok())
            .collect();
        let codes: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(rows, codes);
    }
}
