// Package monitor is the runtime-error side of a Numaflow MonoVertex pod:
// the numa container records the errors of its user-defined containers in a
// directory the pod shares, and port 2470 serves them to Numaflow's
// MonoVertex daemon, which shows them in the UI's Errors tab. In the pods of
// Numaflow v1.8 a monitor sidecar serves the port; in those of Numaflow's
// main branch (the port named runtime on the numa container) the numa
// container serves it itself ([StartRuntime]). Either of sluice's serves
// the same directory, and leaves the port to the other when it is held.
//
// # Files
//
// A [Store] keeps the errors under its directory, by default
// /var/numaflow/runtime/application-errors (the runtime-vol emptyDir every
// container of the pod mounts at /var/numaflow/runtime): one directory per
// container, named by the container in the error's message
// ("UDF_EXECUTION_ERROR(<container>): ...", "numa" when it names none), each
// error a file <unix seconds>-<sequence>-numa.json holding one [Entry] as
// JSON (the sequence, counted by the Store, keeps apart the errors of one
// second), written as current-numa.json and renamed, at most
// [DefaultMaxPerContainer] files a container (the oldest go first). Numaflow's
// v1.8 monitor and its main branch's numa container read this layout (the
// latter writes <unix nanoseconds>-<sequence>-numa.json itself).
//
// # Endpoint
//
// [Handler] serves GET /runtime/errors: {"errorMessage": null, "data":
// [Entry...]} with every error of every container, or status 500 and the
// error in errorMessage when the directory cannot be read; HEAD, which the
// daemon sends to tell whether a pod is active, answers 200. It is served
// on port 2470 over HTTPS with a self-signed certificate, as Numaflow's is;
// the daemon does not verify it.
//
// # Who serves the port
//
// [StartRuntime] (vertex processor) binds the port, or, when another
// process holds it (a v1.8 pod's monitor sidecar, started before the numa
// container), logs that and serves nothing. [ListenWhenFree] (vertex
// monitor) waits while the port is held, so that a monitor sidecar that
// starts second stays up instead of restarting.
package monitor
