// An empty translation unit: the shared targets built from sparq's layer
// libraries (libsparq and the layer checks in CMakeLists.txt) need one source.
