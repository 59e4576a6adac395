//! Applications as a cluster serves them (`kubectl get -o json`), in the shapes of the
//! examples people try backups with: nginx with a log volume and backup hooks (Velero's
//! example), a three-node Cassandra StatefulSet with a storage class, an NFS server with a
//! PV and a claim and a web tier, WordPress with MySQL behind a headless service, and a
//! custom resource with its definition. Each object carries what the API server assigns
//! (uid, resourceVersion, creationTimestamp, generation, managedFields, status, a
//! Service's cluster IP and node ports, a bound claim's annotations, a PV's claimRef uid,
//! a pod's node, priority and owner).

use serde_json::{json, Value};

/// Adds what the API server assigns to an object it serves; `n` makes it distinct.
pub fn served(mut v: Value, n: u64) -> Value {
    let api = v["apiVersion"].clone();
    let meta = &mut v["metadata"];
    meta["uid"] = json!(format!("6f1c2a7e-0000-4000-8000-{n:012}"));
    meta["resourceVersion"] = json!((1000 + n).to_string());
    meta["creationTimestamp"] = json!("2026-11-30T22:14:05Z");
    meta["managedFields"] = json!([{"manager": "kubectl-client-side-apply",
        "operation": "Update", "apiVersion": api, "time": "2026-11-30T22:14:05Z",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}]);
    if v["kind"] == "Deployment" || v["kind"] == "StatefulSet" {
        v["metadata"]["generation"] = json!(1);
        v["status"] = json!({"replicas": v["spec"]["replicas"], "readyReplicas": v["spec"]["replicas"],
            "observedGeneration": 1});
    }
    v
}

fn ns(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
}

fn bound_pvc(ns: &str, name: &str, pv: &str, class: &str, size: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": ns},
            "annotations": {"pv.kubernetes.io/bind-completed": "yes",
                            "pv.kubernetes.io/bound-by-controller": "yes",
                            "volume.kubernetes.io/storage-provisioner": "rbd.csi.ceph.com"},
            "finalizers": ["kubernetes.io/pvc-protection"]},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}},
                 "storageClassName": class, "volumeMode": "Filesystem", "volumeName": pv},
        "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": size}}})
}

fn pv(name: &str, ns: &str, claim: &str, class: &str, size: &str, n: u64) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": "rbd.csi.ceph.com"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": size},
                 "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": ns,
                              "name": claim, "uid": format!("6f1c2a7e-0000-4000-8000-{n:012}"),
                              "resourceVersion": "4711"},
                 "csi": {"driver": "rbd.csi.ceph.com", "volumeHandle": format!("0001-{name}")},
                 "persistentVolumeReclaimPolicy": "Delete", "storageClassName": class,
                 "volumeMode": "Filesystem"},
        "status": {"phase": "Bound"}})
}

fn service(ns: &str, name: &str, port: u64, kind: &str, ip: &str) -> Value {
    let mut ports = json!([{"port": port, "protocol": "TCP", "targetPort": port}]);
    let mut spec = json!({"type": kind, "selector": {"app": name}, "clusterIP": ip,
        "clusterIPs": [ip], "ipFamilies": ["IPv4"], "sessionAffinity": "None"});
    if kind == "LoadBalancer" {
        ports[0]["nodePort"] = json!(30000 + port % 1000);
        spec["externalTrafficPolicy"] = json!("Local");
        spec["healthCheckNodePort"] = json!(31999);
    }
    spec["ports"] = ports;
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": spec, "status": {"loadBalancer": {}}})
}

fn pod(ns: &str, name: &str, owner: (&str, &str), claims: &[&str], image: &str) -> Value {
    let volumes: Vec<Value> = claims
        .iter()
        .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
        .chain([json!({"name": "kube-api-access-x1", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}})])
        .collect();
    let mounts: Vec<Value> = claims
        .iter()
        .map(|c| json!({"name": c, "mountPath": format!("/data/{c}")}))
        .collect();
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": ns},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner.0, "name": owner.1,
                                 "uid": "6f1c2a7e-ffff-4000-8000-000000000001", "controller": true}]},
        "spec": {"nodeName": "worker-2", "priority": 0, "serviceAccountName": "default",
                 "containers": [{"name": "main", "image": image, "volumeMounts": mounts}],
                 "volumes": volumes},
        "status": {"phase": "Running", "podIP": "10.244.1.17"}})
}

/// Velero's nginx example: a namespace, a log claim, a deployment whose pod has fsfreeze
/// backup hooks, a LoadBalancer service.
pub fn nginx() -> Vec<Value> {
    let n = "nginx-example";
    let mut deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx-deployment", "namespace": n},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}});
    deploy["spec"]["template"]["metadata"]["annotations"] = json!({
        "pre.hook.backup.lockgate.io/container": "fsfreeze",
        "pre.hook.backup.lockgate.io/command": "[\"/sbin/fsfreeze\", \"--freeze\", \"/var/log/nginx\"]"});
    let mut p = pod(
        n,
        "nginx-deployment-7c5ddbdf54-x2x9k",
        ("ReplicaSet", "nginx-deployment-7c5ddbdf54"),
        &["nginx-logs"],
        "nginx:1.27",
    );
    p["metadata"]["generateName"] = json!("nginx-deployment-7c5ddbdf54-");
    vec![
        ns(n),
        bound_pvc(n, "nginx-logs", "pvc-0a11", "csi-rbd", "50Mi"),
        pv("pvc-0a11", n, "nginx-logs", "csi-rbd", "50Mi", 11),
        deploy,
        p,
        service(n, "my-nginx", 80, "LoadBalancer", "10.96.14.3"),
    ]
}

/// A Cassandra ring: a headless service, a StatefulSet of three with claim templates, its
/// pods and their claims and volumes on the `fast` storage class.
pub fn cassandra() -> Vec<Value> {
    let n = "cassandra";
    let mut out = vec![
        ns(n),
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "fast"}, "provisioner": "rbd.csi.ceph.com",
            "parameters": {"type": "pd-ssd"}, "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer"}),
        service(n, "cassandra", 9042, "ClusterIP", "None"),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "cassandra", "namespace": n, "labels": {"app": "cassandra"}},
            "spec": {"serviceName": "cassandra", "replicas": 3,
                "selector": {"matchLabels": {"app": "cassandra"}},
                "template": {"metadata": {"labels": {"app": "cassandra"}},
                    "spec": {"terminationGracePeriodSeconds": 1800,
                        "containers": [{"name": "cassandra", "image": "cassandra:4.1",
                            "env": [{"name": "CASSANDRA_SEEDS", "value": "cassandra-0.cassandra.cassandra.svc.cluster.local"}],
                            "volumeMounts": [{"name": "cassandra-data", "mountPath": "/var/lib/cassandra"}]}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "cassandra-data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                             "resources": {"requests": {"storage": "1Gi"}}}}]}}),
    ];
    for i in 0..3u64 {
        let claim = format!("cassandra-data-cassandra-{i}");
        let vol = format!("pvc-ca55{i}");
        out.push(pod(
            n,
            &format!("cassandra-{i}"),
            ("StatefulSet", "cassandra"),
            &[&claim],
            "cassandra:4.1",
        ));
        out.push(bound_pvc(n, &claim, &vol, "fast", "1Gi"));
        out.push(pv(&vol, n, &claim, "fast", "1Gi", 20 + i));
    }
    out
}

/// An NFS server with its own disk, a PV that points at its service, the claim bound to
/// it and a web tier that mounts it (ReadWriteMany).
pub fn nfs() -> Vec<Value> {
    let n = "nfs";
    let mut export = pv("nfs", n, "nfs", "", "1Mi", 31);
    export["spec"] = json!({"accessModes": ["ReadWriteMany"], "capacity": {"storage": "1Mi"},
        "nfs": {"server": "nfs-server.nfs.svc.cluster.local", "path": "/"},
        "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": n,
                     "name": "nfs", "uid": "6f1c2a7e-0000-4000-8000-000000000031", "resourceVersion": "77"},
        "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "", "volumeMode": "Filesystem"});
    let mut claim = bound_pvc(n, "nfs", "nfs", "", "1Mi");
    claim["spec"]["accessModes"] = json!(["ReadWriteMany"]);
    vec![
        ns(n),
        bound_pvc(n, "nfs-server-disk", "pvc-0f5a", "csi-rbd", "10Gi"),
        pv("pvc-0f5a", n, "nfs-server-disk", "csi-rbd", "10Gi", 30),
        pod(
            n,
            "nfs-server-6d4cbd8b7-qq2lp",
            ("ReplicaSet", "nfs-server-6d4cbd8b7"),
            &["nfs-server-disk"],
            "registry.k8s.io/volume-nfs:0.8",
        ),
        service(n, "nfs-server", 2049, "ClusterIP", "10.96.40.2"),
        export,
        claim,
        pod(
            n,
            "nfs-web-5f7b9c-abcde",
            ("ReplicaSet", "nfs-web-5f7b9c"),
            &["nfs"],
            "nginx:1.27",
        ),
        pod(
            n,
            "nfs-web-5f7b9c-fghij",
            ("ReplicaSet", "nfs-web-5f7b9c"),
            &["nfs"],
            "nginx:1.27",
        ),
        service(n, "nfs-web", 80, "LoadBalancer", "10.96.40.3"),
    ]
}

/// WordPress and MySQL: a secret, a headless MySQL service, a LoadBalancer for the site,
/// two deployments with their pods and claims, a service account and its role binding.
pub fn wordpress() -> Vec<Value> {
    let n = "wordpress";
    vec![
        ns(n),
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "mysql-pass", "namespace": n}, "data": {"password": "c2VjcmV0"}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "wordpress", "namespace": n}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "wordpress-view", "namespace": n},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "wordpress", "namespace": n}]}),
        service(n, "wordpress-mysql", 3306, "ClusterIP", "None"),
        service(n, "wordpress", 80, "LoadBalancer", "10.96.77.8"),
        bound_pvc(n, "mysql-pv-claim", "pvc-3d51", "csi-rbd", "20Gi"),
        pv("pvc-3d51", n, "mysql-pv-claim", "csi-rbd", "20Gi", 41),
        bound_pvc(n, "wp-pv-claim", "pvc-3d52", "csi-rbd", "20Gi"),
        pv("pvc-3d52", n, "wp-pv-claim", "csi-rbd", "20Gi", 42),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "wordpress-mysql", "namespace": n},
            "spec": {"replicas": 1, "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": {"app": "wordpress", "tier": "mysql"}},
                "template": {"metadata": {"labels": {"app": "wordpress", "tier": "mysql"}},
                    "spec": {"containers": [{"name": "mysql", "image": "mysql:8.0"}]}}}}),
        pod(
            n,
            "wordpress-mysql-5b8f6b-x1",
            ("ReplicaSet", "wordpress-mysql-5b8f6b"),
            &["mysql-pv-claim"],
            "mysql:8.0",
        ),
        pod(
            n,
            "wordpress-7f9d8c-y2",
            ("ReplicaSet", "wordpress-7f9d8c"),
            &["wp-pv-claim"],
            "wordpress:6.2.1-apache",
        ),
    ]
}

/// A custom kind and one object of it, with its definition.
pub fn custom() -> Vec<Value> {
    vec![
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "backupschedules.ops.example.com"},
            "spec": {"group": "ops.example.com", "scope": "Namespaced",
                "names": {"kind": "BackupSchedule", "plural": "backupschedules", "singular": "backupschedule"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                              "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
            "status": {"acceptedNames": {"kind": "BackupSchedule", "plural": "backupschedules"}}}),
        json!({"apiVersion": "ops.example.com/v1", "kind": "BackupSchedule",
            "metadata": {"name": "nightly", "namespace": "wordpress"},
            "spec": {"cron": "0 2 * * *"}}),
    ]
}

/// Every application, each object served with its own uid.
pub fn all() -> Vec<Value> {
    [nginx(), cassandra(), nfs(), wordpress(), custom()]
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, v)| served(v, i as u64 + 100))
        .collect()
}
