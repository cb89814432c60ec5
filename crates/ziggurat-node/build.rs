//! Links the addon against the Node-API symbols of the process that loads it.
fn main() {
    napi_build::setup();
}
