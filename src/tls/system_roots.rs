//! The system's trust store, found where Go's `crypto/x509` looks on Linux (`root_linux.go`,
//! `root_unix.go`): `$SSL_CERT_FILE`, else the first bundle of a known list that exists; then
//! every file in `$SSL_CERT_DIR` (`:`-separated), else in the known directories, skipping
//! symlinks to files of the same directory (the OpenSSL hash links). Certificates that do not
//! parse are skipped, as Go's `AppendCertsFromPEM` skips them. Used where nats-server leaves
//! Go's `RootCAs` unset: a dialled server without a `ca_file` (the URL resolver over `https`).

use tokio_rustls::rustls::pki_types::{pem::PemObject, CertificateDer};
use tokio_rustls::rustls::RootCertStore;

/// Go's `certFiles` (Debian/Ubuntu, Fedora/RHEL 6, OpenSUSE, OpenELEC, CentOS/RHEL 7,
/// Alpine), in its order.
const FILES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// Go's `certDirectories`.
const DIRS: &[&str] = &["/etc/ssl/certs", "/etc/pki/tls/certs"];

/// The system's roots. An error only when none was found and a file or directory that
/// exists could not be read (Go: `x509: failed to load system roots and no roots provided`).
pub fn load() -> Result<RootCertStore, String> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let files: Vec<String> = match env("SSL_CERT_FILE") {
        Some(f) => vec![f],
        None => FILES.iter().map(|f| f.to_string()).collect(),
    };
    let dirs: Vec<String> = match env("SSL_CERT_DIR") {
        Some(d) => d.split(':').map(str::to_string).collect(),
        None => DIRS.iter().map(|d| d.to_string()).collect(),
    };
    load_from(&files, &dirs)
}

/// The roots of the first of `files` that can be read and of every file in `dirs`.
fn load_from(files: &[String], dirs: &[String]) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    let mut first_err: Option<String> = None;
    let mut note = |what: &str, e: std::io::Error| {
        if e.kind() != std::io::ErrorKind::NotFound && first_err.is_none() {
            first_err = Some(format!("open {what}: {e}"));
        }
    };
    for f in files {
        match std::fs::read(f) {
            Ok(pem) => {
                add_pem(&mut store, &pem);
                break;
            }
            Err(e) => note(f, e),
        }
    }
    for d in dirs {
        let entries = match std::fs::read_dir(d) {
            Ok(e) => e,
            Err(e) => {
                note(d, e);
                continue;
            }
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if same_dir_symlink(&entry) {
                continue;
            }
            if let Ok(pem) = std::fs::read(&path) {
                add_pem(&mut store, &pem);
            }
        }
    }
    tracing::debug!("system trust store: {} root certificates", store.len());
    match first_err {
        Some(e) if store.is_empty() => Err(format!(
            "x509: failed to load system roots and no roots provided; {e}"
        )),
        _ => Ok(store),
    }
}

/// Go's `isSameDirSymlink`: a symlink whose target has no `/`.
fn same_dir_symlink(entry: &std::fs::DirEntry) -> bool {
    entry.file_type().is_ok_and(|t| t.is_symlink())
        && std::fs::read_link(entry.path())
            .is_ok_and(|t| !t.as_os_str().as_encoded_bytes().contains(&b'/'))
}

fn add_pem(store: &mut RootCertStore, pem: &[u8]) {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .filter_map(Result::ok)
        .collect();
    store.add_parsable_certificates(certs);
}

#[cfg(test)]
mod tests {
    use super::load_from as load;

    fn cert_pem() -> String {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.self_signed(&key).expect("cert").pem()
    }

    #[test]
    fn the_first_bundle_that_exists_and_every_file_of_the_directories_are_read() {
        let dir = std::env::temp_dir().join(format!("natsd-roots-{}", std::process::id()));
        let certs = dir.join("certs");
        std::fs::create_dir_all(&certs).expect("dir");
        let s = |p: std::path::PathBuf| p.display().to_string();
        std::fs::write(dir.join("a.crt"), cert_pem() + &cert_pem()).expect("write");
        std::fs::write(dir.join("b.crt"), cert_pem()).expect("write");
        std::fs::write(certs.join("one.pem"), cert_pem()).expect("write");
        std::fs::write(certs.join("junk.txt"), "not a certificate").expect("write");
        // An OpenSSL hash link to a file of the same directory is not read twice.
        std::os::unix::fs::symlink("one.pem", certs.join("1a2b3c4d.0")).expect("symlink");
        let missing = s(dir.join("missing.crt"));
        let files = [missing.clone(), s(dir.join("a.crt")), s(dir.join("b.crt"))];
        let store = load(&files, &[s(certs.clone())]).expect("roots");
        assert_eq!(store.len(), 3);
        assert_eq!(load(&[missing], &[]).map(|s| s.len()), Ok(0));
        // A place that exists but cannot be read is the error when nothing was found.
        let e = load(&[s(certs.clone())], &[]).map(|s| s.len());
        let e = e.expect_err("a directory is not a bundle");
        assert!(e.starts_with("x509: failed to load system roots"), "{e}");
        assert!(load(&[s(certs)], &[s(dir.clone())]).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
