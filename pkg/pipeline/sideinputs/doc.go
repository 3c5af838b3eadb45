// Package sideinputs runs a pipeline's side inputs and hands their values to
// the vertices that name them.
//
// # Model
//
// A [Manager] asks each side input's [Retriever] (its container, over
// sideinput.v1: a sideinputclient.Client of pkg/udf/sideinputclient) for a
// value once at start and then at every time its schedule
// (spec.sideInputs[].trigger) matches, and puts each value into a [Store]
// unless the container says no_broadcast. The store is
// [Memory] for a pipeline in one process and a JetStream key-value bucket,
// [KV], for a pipeline across processes.
//
// [Files] watches the store and writes each value to a file named after the
// side input in a directory (/var/numaflow/side-inputs by default, where
// numaflow-go's UDFs read them), by writing a temporary file and renaming it
// over the old one, so a reader sees the old value or the new one, never a
// part. [Files.Gate] gives a vertex what it waits for: every side input it
// names with a value on disk.
//
// # Failures
//
// A container that is down or answers with an error leaves the last value in
// place; the manager logs it and asks again on the next tick (and, until the
// first value is in, every second). A store that cannot be written is the
// same: the value is put again on the next tick.
package sideinputs
