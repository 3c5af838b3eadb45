// Package jsstore is a [watermark.Store] in a JetStream key-value bucket, one
// bucket per edge, shared by the processors that write to the edge and the
// vertices that read it, in any number of processes.
//
// # Keys and values
//
// The entry of processor p for partition n is the key "p.n" (p is a
// [watermark.ValidProcessor] name, n in decimal). Its value is 24 bytes: the
// watermark and the heartbeat, each in milliseconds since the Unix epoch,
// and the offset, each a big-endian int64. The bucket keeps one value per key (history
// 1); [Store.Delete] leaves delete markers, which [Store.Entries] skips.
//
// # Reads
//
// [Store.Entries] reads the latest value of every key with one ordered
// consumer of the bucket's stream, delivered last per subject: one round trip
// and the values, whatever the number of processors. A key or value that does
// not decode fails the read with [ErrMalformed].
package jsstore
