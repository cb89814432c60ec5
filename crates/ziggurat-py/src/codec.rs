//! The "auto" serializer: compact JSON for values made only of plain JSON-shaped
//! data, pickle protocol 5 for everything else.
//!
//! Most cached values are small dicts and lists of strings and numbers; as JSON
//! they encode several times faster than with pickle and decode (orjson) about
//! twice as fast. JSON cannot carry everything pickle can (tuples, bytes,
//! subclasses, shared references, non-finite floats...), so a strict guard
//! writes as JSON only values whose round trip is exact (same types, same
//! values). The two encodings are told apart by their first byte: pickle
//! protocol >= 2 starts with PROTO (0x80), and JSON text, being ASCII-led,
//! never does.
//!
//! It lives in Rust so that the cache core can encode and decode without a Python
//! call frame. The guard's walk writes the JSON text as it goes (serde_json
//! formats the strings that need escapes and the numbers; the bytes are those
//! orjson.dumps writes): one pass over the value instead of a walk then a call
//! to orjson.dumps, whose 1 KiB starting buffer, allocated and shrunk on every
//! call, cost more than the rest of an encoding of a small dict. orjson reads
//! the text back.

use pyo3::exceptions::{PyImportError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyMemoryView, PyString,
};
use ziggurat_cache::{format_by, Format, JsonText, PICKLE_PROTOCOL};

use crate::convert::cache_err;

/// Encodes plain JSON-shaped values with orjson and everything else with pickle.
#[pyclass(module = "ziggurat._native", frozen, name = "AutoCodec")]
pub struct AutoCodec {
    json_loads: Py<PyAny>,
    pickle_dumps: Py<PyAny>,
    pickle_loads: Py<PyAny>,
}

impl AutoCodec {
    /// The encoded form of `obj`: JSON when the walk finds its round trip
    /// exact, else a pickle (protocol 5). Pickle errors propagate.
    pub fn encode_native<'py>(
        &self,
        py: Python<'py>,
        obj: &Bound<'py, PyAny>,
    ) -> PyResult<Encoded<'py>> {
        let mut out = JsonText::default();
        if write_plain(obj, 0, &mut out) {
            return Ok(Encoded::Native(out.into_bytes()));
        }
        let out = self.pickle_dumps.bind(py).call1((obj, PICKLE_PROTOCOL))?;
        as_bytes(out, "pickle.dumps").map(Encoded::Py)
    }

    /// [`AutoCodec::encode_native`] as a bytes object.
    pub fn encode<'py>(
        &self,
        py: Python<'py>,
        obj: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        Ok(self.encode_native(py, obj)?.into_py(py))
    }

    /// The object encoded in `data` (bytes, bytearray or memoryview) by
    /// [`AutoCodec::encode`]. Empty data is a ValueError.
    pub fn decode(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let loads = match format_by(first_byte(data)?).map_err(cache_err)? {
            Format::Pickle => &self.pickle_loads,
            Format::Json => &self.json_loads,
        };
        loads.call1(py, (data,))
    }
}

#[pymethods]
impl AutoCodec {
    #[new]
    fn new(py: Python<'_>) -> PyResult<Self> {
        let orjson = py.import("orjson").map_err(|e| {
            let err = PyImportError::new_err(
                "the 'auto' serializer needs the orjson package: pip install orjson",
            );
            err.set_cause(py, Some(e));
            err
        })?;
        let pickle = py.import("pickle")?;
        Ok(AutoCodec {
            json_loads: orjson.getattr("loads")?.unbind(),
            pickle_dumps: pickle.getattr("dumps")?.unbind(),
            pickle_loads: pickle.getattr("loads")?.unbind(),
        })
    }

    /// Encodes `obj`: JSON for plain data (dict with str keys, list, str, int in
    /// the 64-bit range, finite float, bool, None, no shared containers), else
    /// pickle protocol 5.
    ///
    /// >>> AutoCodec().dumps({"a": [1, 2.5, None]})
    /// b'{"a":[1,2.5,null]}'
    /// >>> AutoCodec().dumps((1, 2))[:1]
    /// b'\x80'
    fn dumps<'py>(
        &self,
        py: Python<'py>,
        obj: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.encode(py, obj)
    }

    /// Decodes bytes made by `dumps`; a leading 0x80 byte marks a pickle.
    ///
    /// >>> c = AutoCodec()
    /// >>> c.loads(c.dumps({"a": (1, 2)}))
    /// {'a': (1, 2)}
    fn loads(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.decode(py, data)
    }
}

fn as_bytes<'py>(out: Bound<'py, PyAny>, what: &str) -> PyResult<Bound<'py, PyBytes>> {
    out.cast_into_exact::<PyBytes>()
        .map_err(|_| PyTypeError::new_err(format!("{what} did not return bytes")))
}

/// The first byte of bytes, a bytearray or a memoryview (None: empty).
fn first_byte(data: &Bound<'_, PyAny>) -> PyResult<Option<u8>> {
    if let Ok(b) = data.cast::<PyBytes>() {
        Ok(b.as_bytes().first().copied())
    } else if data.is_instance_of::<PyByteArray>() || data.is_instance_of::<PyMemoryView>() {
        if data.len()? == 0 {
            return Ok(None);
        }
        Ok(Some(data.get_item(0)?.extract::<u8>()?))
    } else {
        Err(PyTypeError::new_err(format!(
            "data must be bytes, bytearray or memoryview, not {}",
            data.get_type().name()?
        )))
    }
}

/// Bytes a value was encoded to: written here, or a bytes object a Python
/// serializer returned.
pub enum Encoded<'py> {
    /// JSON text written by the walk.
    Native(Vec<u8>),
    /// The bytes a Python call returned.
    Py(Bound<'py, PyBytes>),
}

impl<'py> Encoded<'py> {
    /// The encoded bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Encoded::Native(v) => v,
            Encoded::Py(b) => b.as_bytes(),
        }
    }

    /// The encoded bytes as a bytes object (made now for native text).
    pub fn into_py(self, py: Python<'py>) -> Bound<'py, PyBytes> {
        match self {
            Encoded::Native(v) => PyBytes::new(py, &v),
            Encoded::Py(b) => b,
        }
    }

    /// A bytes object of the encoded bytes.
    pub fn to_py(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        match self {
            Encoded::Native(v) => PyBytes::new(py, v),
            Encoded::Py(b) => b.clone(),
        }
    }
}

/// Appends `obj` to `out` as JSON and returns true when its JSON round trip
/// gives back the same types and values (the envelope's rule); false
/// otherwise (`out` then holds a partial text the caller drops).
fn write_plain(obj: &Bound<'_, PyAny>, depth: u32, out: &mut JsonText) -> bool {
    // Exact type checks throughout: a subclass (str enum, OrderedDict, IntEnum...)
    // would come back from JSON as its base type.
    if let Ok(s) = obj.cast_exact::<PyString>() {
        // A str with lone surrogates has no UTF-8 form: pickle takes it.
        return s.to_str().is_ok_and(|s| out.str(s));
    }
    if obj.is_none() {
        out.null();
        return true;
    }
    // bool before int: it is an int subclass.
    if let Ok(b) = obj.cast_exact::<PyBool>() {
        out.bool(b.is_true());
        return true;
    }
    if obj.is_exact_instance_of::<PyInt>() {
        // Beyond 64 bits orjson.loads would not read it back.
        return obj.extract::<i64>().is_ok_and(|n| out.int(n));
    }
    if let Ok(f) = obj.cast_exact::<PyFloat>() {
        return out.float(f.value());
    }
    // The address names a container while the walk runs no Python code: every
    // container recorded stays reachable from the value. Should another thread
    // free one and reuse its address, the value is only pickled needlessly.
    if let Ok(list) = obj.cast_exact::<PyList>() {
        if !out.enter(depth, obj.as_ptr() as usize) {
            return false;
        }
        out.push(b'[');
        for (i, item) in list.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            if !write_plain(&item, depth + 1, out) {
                return false;
            }
        }
        out.push(b']');
        return true;
    }
    if let Ok(dict) = obj.cast_exact::<PyDict>() {
        if !out.enter(depth, obj.as_ptr() as usize) {
            return false;
        }
        out.push(b'{');
        for (i, (k, v)) in dict.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let Ok(k) = k.cast_exact::<PyString>() else {
                return false; // JSON keys are strings: an int key would come back a str
            };
            if !k.to_str().is_ok_and(|k| out.str(k)) {
                return false;
            }
            out.push(b':');
            if !write_plain(&v, depth + 1, out) {
                return false;
            }
        }
        out.push(b'}');
        return true;
    }
    false
}
