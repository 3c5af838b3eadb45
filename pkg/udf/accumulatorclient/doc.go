// Package accumulatorclient is the client of an accumulator.v1 server: a
// user-defined accumulator function built with numaflow-go's accumulator
// package or sluice's pkg/sdk/accumulator.
//
// # Model
//
// A [Client] opens one long-lived [Stream]; the server keeps one accumulator
// per key set on it. The first request of a key set opens its accumulator
// ([OpOpen]), the next ones append to it ([OpAppend]), and [OpClose] ends
// it: the accumulator returns, and the server answers with a [Response]
// whose EOF is set. Every other response is a message an accumulator
// emitted, with the event time, watermark and ID the function gave it.
// Responses come in the order the server sends them, at any time.
//
// The server is found in a directory by its server-info file,
// accumulator-server-info, and socket, accumulator.sock (see
// [udf.KindAccumulator]).
package accumulatorclient
