//! The cluster's certificates: one CA, the API server's and the kubelet's serving certificates,
//! a client certificate per component (its Kubernetes user and group in CN and O), and the
//! service-account signing key. Written once under `<state>/pki` by `cluster up`.

use std::{path::Path, process::Command};

use anyhow::{ensure, Context, Result};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

use super::Net;

/// A client identity: file stem, user (CN), groups (O).
#[derive(Debug)]
pub struct Client {
    pub stem: &'static str,
    pub user: String,
    pub group: Option<&'static str>,
}

/// The component identities, as a real cluster has them (the default RBAC of the API server
/// binds each to its role).
pub fn clients(node: &str) -> Vec<Client> {
    vec![
        Client {
            stem: "admin",
            user: "nsight-admin".into(),
            group: Some("system:masters"),
        },
        Client {
            stem: "apiserver-kubelet-client",
            user: "kube-apiserver-kubelet-client".into(),
            group: Some("system:masters"),
        },
        Client {
            stem: "kubelet-client",
            user: format!("system:node:{node}"),
            group: Some("system:nodes"),
        },
        Client {
            stem: "controller-manager",
            user: "system:kube-controller-manager".into(),
            group: None,
        },
        Client {
            stem: "scheduler",
            user: "system:kube-scheduler".into(),
            group: None,
        },
        Client {
            stem: "kube-proxy",
            user: "system:kube-proxy".into(),
            group: None,
        },
    ]
}

/// Writes `ca.crt/key`, `apiserver.crt/key`, `kubelet.crt/key`, `<client>.crt/key` for each of
/// [`clients`], and `sa.key`/`sa.pub` into `dir`.
pub fn write(dir: &Path, net: &Net, node: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "nsight-cluster-ca");
    let ca_key = KeyPair::generate()?;
    let ca_key_pem = ca_key.serialize_pem();
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key)?;
    put(dir, "ca.crt", &ca.pem())?;
    put(dir, "ca.key", &ca_key_pem)?;

    let serving = |stem: &str, cn: &str, sans: Vec<String>| -> Result<()> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(sans)?;
        params.distinguished_name.push(DnType::CommonName, cn);
        let cert = params.signed_by(&key, &ca)?;
        put(dir, &format!("{stem}.crt"), &cert.pem())?;
        put(dir, &format!("{stem}.key"), &key.serialize_pem())
    };
    serving(
        "apiserver",
        "kube-apiserver",
        vec![
            net.node_ip.clone(),
            net.api_service_ip.clone(),
            "127.0.0.1".into(),
            "localhost".into(),
            "kubernetes".into(),
            "kubernetes.default".into(),
            "kubernetes.default.svc".into(),
            "kubernetes.default.svc.cluster.local".into(),
        ],
    )?;
    serving("kubelet", node, vec![net.node_ip.clone(), node.to_owned()])?;
    for client in clients(node) {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, client.user.as_str());
        if let Some(group) = client.group {
            params
                .distinguished_name
                .push(DnType::OrganizationName, group);
        }
        let cert = params.signed_by(&key, &ca)?;
        put(dir, &format!("{}.crt", client.stem), &cert.pem())?;
        put(dir, &format!("{}.key", client.stem), &key.serialize_pem())?;
    }
    write_service_account_key(dir)
}

/// `sa.key` (SEC1 "EC PRIVATE KEY", P-256) and `sa.pub` in `dir`. kube-apiserver and the
/// controller-manager read the key as SEC1, which rcgen does not write (PKCS#8 only): openssl,
/// part of every Debian base system, does.
pub fn write_service_account_key(dir: &Path) -> Result<()> {
    let openssl = |args: &[&str]| -> Result<()> {
        let out = Command::new("openssl")
            .current_dir(dir)
            .args(args)
            .output()
            .context("openssl (Debian package `openssl`) for the service-account key")?;
        ensure!(
            out.status.success(),
            "openssl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    };
    openssl(&[
        "ecparam",
        "-name",
        "prime256v1",
        "-genkey",
        "-noout",
        "-out",
        "sa.key",
    ])?;
    openssl(&["ec", "-in", "sa.key", "-pubout", "-out", "sa.pub"])
}

fn put(dir: &Path, name: &str, pem: &str) -> Result<()> {
    let path = dir.join(name);
    std::fs::write(&path, pem).with_context(|| format!("cannot write {}", path.display()))?;
    if name.ends_with(".key") {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}
