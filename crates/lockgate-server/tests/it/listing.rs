//! `GET /v1/jobs`: newest first, the active filter and the attribute selector, over real
//! HTTP; the old query (oldest first, `after`) keeps working.

use crate::harness::*;
use lockgate_api::{JobList, JobOrder, JobQuery};
use lockgate_core::Outcome;

fn ids(page: &JobList) -> Vec<u64> {
    page.jobs.iter().map(|j| j.id).collect()
}

/// 200 finished jobs, then 12 live ones (2 running, 10 queued): the 212 jobs.
fn busy_server(dir: &std::path::Path) -> TestServer {
    let s = TestServer::start(dir, "");
    let admin = s.admin();
    for i in 0..200 {
        let ds = if i % 2 == 0 { "ds1" } else { "ds2" };
        let j = admin
            .submit(&job("backup", &[("datastore", ds)]))
            .unwrap()
            .0;
        let token = j.lease.expect("admitted at once").token;
        admin
            .finish_job(j.id, token, Outcome::Succeeded, None)
            .unwrap();
    }
    let body = "[global]\nmax_running = 2\n";
    admin.put_policy(body, false, None).unwrap();
    for _ in 0..12 {
        admin
            .submit(&job("verify", &[("datastore", "ds1")]))
            .unwrap();
    }
    s
}

#[test]
fn newest_first_puts_the_running_jobs_of_212_on_page_one() {
    let dir = tempdir();
    let s = busy_server(dir.path());
    let admin = s.admin();
    let desc = JobQuery {
        order: Some(JobOrder::Desc),
        ..Default::default()
    };
    let page = admin.jobs(&desc).unwrap();
    assert_eq!(ids(&page), (113..=212).rev().collect::<Vec<_>>());
    assert_eq!(page.next, Some(113));
    let running: Vec<u64> = page
        .jobs
        .iter()
        .filter(|j| j.state == lockgate_core::JobState::Running)
        .map(|j| j.id)
        .collect();
    assert_eq!(running, [202, 201]);
    // Paging with `before` visits every job once, newest first.
    let mut q = JobQuery {
        limit: Some(70),
        ..desc.clone()
    };
    let mut seen = Vec::new();
    loop {
        let page = admin.jobs(&q).unwrap();
        seen.extend(ids(&page));
        match page.next {
            Some(n) => q.before = Some(n),
            None => break,
        }
    }
    assert_eq!(seen, (1..=212).rev().collect::<Vec<_>>());
    // The old query still lists oldest first and pages with `after`.
    let old = admin
        .jobs(&JobQuery {
            limit: Some(3),
            after: Some(10),
            ..Default::default()
        })
        .unwrap();
    assert_eq!((ids(&old), old.next), (vec![11, 12, 13], Some(13)));
}

#[test]
fn active_and_attr_filters_apply_on_the_server() {
    let dir = tempdir();
    let s = busy_server(dir.path());
    let admin = s.admin();
    let active = admin
        .jobs(&JobQuery {
            active: Some(true),
            order: Some(JobOrder::Desc),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        (ids(&active), active.next),
        ((201..=212).rev().collect(), None)
    );
    // `attr` is a selector: ds2 was only on the odd-numbered finished backups.
    let ds2 = JobQuery {
        attr: Some("datastore=ds2".into()),
        limit: Some(30),
        ..Default::default()
    };
    let page = admin.jobs(&ds2).unwrap();
    assert_eq!(ids(&page), (2..=60).step_by(2).collect::<Vec<_>>());
    assert_eq!(page.next, Some(60));
    let mut q = ds2.clone();
    let mut all = Vec::new();
    loop {
        let page = admin.jobs(&q).unwrap();
        all.extend(ids(&page));
        match page.next {
            Some(n) => q.after = Some(n),
            None => break,
        }
    }
    assert_eq!(all, (2..=200).step_by(2).collect::<Vec<_>>());
    let both = admin
        .jobs(&JobQuery {
            attr: Some("datastore=ds1,kind=verify".into()),
            state: Some("queued".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(ids(&both), (203..=212).collect::<Vec<_>>());
    // A bad selector or order names the parameter.
    let err = admin
        .jobs(&JobQuery {
            attr: Some("datastore in (".into()),
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(err.status(), Some(422), "{err}");
    assert!(err.to_string().contains("attr"), "{err}");
    let (status, body) = s.raw("GET", "/v1/jobs?order=sideways", Some(&s.admin), None);
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("\"field\":\"order\""), "{body}");
}
