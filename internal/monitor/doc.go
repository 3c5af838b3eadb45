// Package monitor is the runtime-error side of a Numaflow MonoVertex pod:
// the numa container records the errors of its user-defined containers in a
// directory the pod shares, and the monitor sidecar serves them to
// Numaflow's MonoVertex daemon, which shows them in the UI's Errors tab.
//
// # Files
//
// A [Store] keeps the errors under its directory, by default
// /var/numaflow/runtime/application-errors (the runtime-vol emptyDir every
// container of the pod mounts at /var/numaflow/runtime): one directory per
// container, named by the container in the error's message
// ("UDF_EXECUTION_ERROR(<container>): ...", "numa" when it names none), each
// error a file <unix seconds>-numa.json holding one [Entry] as JSON, written
// as current-numa.json and renamed, at most [DefaultMaxPerContainer] files a
// container (the oldest go first). This is the layout Numaflow's own numa
// container writes and its monitor reads.
//
// # Endpoint
//
// [Handler] serves GET /runtime/errors: {"errorMessage": null, "data":
// [Entry...]} with every error of every container, or status 500 and the
// error in errorMessage when the directory cannot be read. The monitor
// serves it on port 2470 over HTTPS with a self-signed certificate, as
// Numaflow's does; the daemon does not verify it.
package monitor
