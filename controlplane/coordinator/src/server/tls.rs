//! Mutual TLS for the agent channel. A TLS directory holds what a Kubernetes TLS Secret holds:
//!
//! ```text
//!  <dir>/ca.crt                 the CA both sides trust
//!  <dir>/tls.crt, tls.key       the coordinator's server certificate
//!  <dir>/agent.crt, agent.key   the client certificate agents present
//! ```
//! For the local (no-cluster) mode, [`ensure_local_certs`] creates a fresh CA and both
//! certificates when the directory has none. Private keys are written with mode 0600.

use std::{
    fs,
    io::Write,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

/// The DNS name agents expect on the coordinator's certificate in local mode.
pub const LOCAL_SERVER_NAME: &str = "localhost";

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: put the agent-channel certificates there (ca.crt, tls.crt, tls.key), or start with --insecure-agent-channel for a trusted network only")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot generate local certificates")]
    Generate(#[from] rcgen::Error),
}

fn read(path: PathBuf) -> Result<Vec<u8>, TlsError> {
    fs::read(&path).map_err(|source| TlsError::Read {
        path: path.display().to_string(),
        source,
    })
}

fn write(path: PathBuf, contents: &str, mode: u32) -> Result<(), TlsError> {
    let err = |source| TlsError::Write {
        path: path.display().to_string(),
        source,
    };
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&path)
        .map_err(err)?;
    file.write_all(contents.as_bytes()).map_err(err)
}

/// The server side: our certificate, and client certificates must chain to the CA.
pub fn server_config(dir: &Path) -> Result<ServerTlsConfig, TlsError> {
    let identity = Identity::from_pem(read(dir.join("tls.crt"))?, read(dir.join("tls.key"))?);
    let ca = Certificate::from_pem(read(dir.join("ca.crt"))?);
    Ok(ServerTlsConfig::new().identity(identity).client_ca_root(ca))
}

/// Creates a CA, a server certificate for `localhost`/`127.0.0.1` and an agent client
/// certificate in `dir` unless `ca.crt` already exists. Returns whether it generated them.
pub fn ensure_local_certs(dir: &Path) -> Result<bool, TlsError> {
    if dir.join("ca.crt").exists() {
        return Ok(false);
    }
    fs::create_dir_all(dir).map_err(|source| TlsError::Write {
        path: dir.display().to_string(),
        source,
    })?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "nsight-operator local CA");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

    let leaf = |names: Vec<String>, cn: &str, usage: ExtendedKeyUsagePurpose| {
        let mut params = CertificateParams::new(names)?;
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &ca)?;
        Ok::<_, rcgen::Error>((cert.pem(), key.serialize_pem()))
    };
    let (server_crt, server_key) = leaf(
        vec![LOCAL_SERVER_NAME.into(), "127.0.0.1".into()],
        "nsight-coordinator",
        ExtendedKeyUsagePurpose::ServerAuth,
    )?;
    let (agent_crt, agent_key) = leaf(
        vec!["nsight-agent".into()],
        "nsight-agent",
        ExtendedKeyUsagePurpose::ClientAuth,
    )?;
    write(dir.join("tls.crt"), &server_crt, 0o644)?;
    write(dir.join("tls.key"), &server_key, 0o600)?;
    write(dir.join("agent.crt"), &agent_crt, 0o644)?;
    write(dir.join("agent.key"), &agent_key, 0o600)?;
    // ca.crt last: its presence means the set is complete.
    write(dir.join("ca.crt"), &ca.pem(), 0o644)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn generates_once_with_private_keys_0600() {
        let dir = std::env::temp_dir().join(format!("nsight-tls-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        assert!(ensure_local_certs(&dir).unwrap());
        let first = fs::read(dir.join("ca.crt")).unwrap();
        assert!(
            !ensure_local_certs(&dir).unwrap(),
            "an existing set is kept"
        );
        assert_eq!(fs::read(dir.join("ca.crt")).unwrap(), first);
        for key in ["tls.key", "agent.key"] {
            let mode = fs::metadata(dir.join(key)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{key}");
        }
        assert!(server_config(&dir).is_ok());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn missing_files_say_what_to_do() {
        let err = server_config(Path::new("/nonexistent/tls")).unwrap_err();
        assert!(
            err.to_string().contains("--insecure-agent-channel"),
            "{err}"
        );
    }
}
