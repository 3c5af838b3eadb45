// Package sideinputclient is the runtime's side of the sideinput.v1 wire: a
// [Client] asks a side-input container on its unix socket for the side
// input's current value, and whether to broadcast it. It is the
// [sideinputs.Retriever] a pipeline's side-input manager calls on each
// side input's schedule.
package sideinputclient
