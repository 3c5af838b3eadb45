// Package accumulator serves an accumulator function as an accumulator.v1
// UDF (socket accumulator.sock, server-info file accumulator-server-info),
// speaking the same contract as numaflow-go's accumulator package.
//
// # Model
//
// A [Creator] makes one [Accumulator] per key set. Its Accumulate reads
// the key set's messages from a channel, as the runtime feeds them, each
// with the vertex's watermark, and writes what it emits to another; the
// runtime closes the input once the key set has been idle for the
// vertex's timeout. An emitted [Message] keeps the ID, event time and
// watermark of the [Datum] it is made from ([MessageFromDatum]).
package accumulator
