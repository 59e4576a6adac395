//! Planted bugs, for the chaos harness only (tests/chaos, docs/reliability.md).
//!
//! A checker that passes a broken system proves nothing, so the harness runs the cluster
//! with one promise broken on purpose and its checker must report it. The bugs here live
//! inside the server; they exist only in a build with the `plants` feature
//! (`scripts/chaos --plant NAME` makes one under `target/plants/`), and even there only
//! when `LOCKGATE_PLANT` names one. In every other build [`planted`] is `false` and
//! nothing below runs.

/// A bug the server can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plant {
    /// `ack-before-commit`: a finish is answered the moment the engine takes it, before
    /// the batch that records it is committed.
    AckBeforeCommit,
}

impl Plant {
    /// The name `LOCKGATE_PLANT` gives it.
    pub fn name(self) -> &'static str {
        match self {
            Plant::AckBeforeCommit => "ack-before-commit",
        }
    }
}

const ALL: [Plant; 1] = [Plant::AckBeforeCommit];

/// Checks `LOCKGATE_PLANT` as the server starts, so a harness can never run a server
/// without the bug it asked for.
///
/// # Errors
/// A name that is no plant, or any name in a build without the `plants` feature.
pub fn check() -> Result<(), String> {
    let Ok(name) = std::env::var("LOCKGATE_PLANT") else {
        return Ok(());
    };
    if !cfg!(feature = "plants") {
        return Err(format!(
            "LOCKGATE_PLANT={name:?} is set, but this build carries no planted bugs (only a \
             build with the plants feature does)"
        ));
    }
    match ALL.into_iter().find(|p| p.name() == name) {
        Some(_) => {
            tracing::warn!("planted bug {name} is active: this server breaks a promise");
            Ok(())
        }
        None => {
            let known: Vec<&str> = ALL.iter().map(|p| p.name()).collect();
            Err(format!(
                "LOCKGATE_PLANT={name:?} names no planted bug: known are {}",
                known.join(", ")
            ))
        }
    }
}

/// Whether this server carries `plant`.
#[cfg(feature = "plants")]
pub fn planted(plant: Plant) -> bool {
    static ACTIVE: std::sync::OnceLock<Option<Plant>> = std::sync::OnceLock::new();
    let active = ACTIVE.get_or_init(|| {
        let name = std::env::var("LOCKGATE_PLANT").ok()?;
        ALL.into_iter().find(|p| p.name() == name)
    });
    *active == Some(plant)
}

/// Whether this server carries `plant`: never, in a build without the `plants` feature.
#[cfg(not(feature = "plants"))]
pub fn planted(_plant: Plant) -> bool {
    false
}
