//! The signer of a cache's values, counters and events (`ziggurat.cluster.signing`):
//! the tier's own signing is the crate's; these checks serve the tools that
//! look at what Redis holds (`ziggurat doctor`).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use ziggurat_cluster as zc;

/// Signs and checks the values, counters and events of the cache `name` (its
/// segment's name): the first of `secrets` signs, every one verifies.
///
/// >>> s = ClusterSigner("shop", [b"new-secret-0123456789", b"old-secret-0123456789"])
/// >>> mac = s.value_mac(b"user:1", b"payload")
/// >>> s.value_ok(b"user:1", b"payload", mac), s.value_ok(b"user:2", b"payload", mac)
/// (True, False)
#[pyclass(frozen, module = "ziggurat._native")]
pub struct ClusterSigner(pub(super) zc::Signer);

#[pymethods]
impl ClusterSigner {
    #[new]
    fn new(name: &str, secrets: Vec<Vec<u8>>) -> PyResult<Self> {
        zc::Signer::new(name.as_bytes(), &secrets)
            .map(ClusterSigner)
            .map_err(|p| {
                PyValueError::new_err(match p {
                    zc::SecretProblem::None => "secret must name at least one secret".to_string(),
                    zc::SecretProblem::Short(i) => format!(
                        "secret {i} must be at least {} bytes (each of them, for a list)",
                        zc::MIN_SECRET
                    ),
                })
            })
    }

    /// The MAC of a value's `body` stored under `key` (16 bytes).
    fn value_mac<'py>(&self, py: Python<'py>, key: &[u8], body: &[u8]) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.value_mac(key, body))
    }

    /// Whether `mac` is the MAC of `body` under `key` for any secret.
    fn value_ok(&self, key: &[u8], body: &[u8], mac: &[u8]) -> bool {
        self.0.value_ok(key, body, mac)
    }

    /// Whether `mac` is the counter mark of `key` and `written` for any secret.
    fn counter_ok(&self, key: &[u8], written: &[u8], mac: &[u8]) -> bool {
        self.0.counter_ok(key, written, mac)
    }
}
