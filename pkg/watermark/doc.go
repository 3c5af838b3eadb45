// Package watermark computes, publishes and fetches the watermarks of a
// pipeline: for each vertex, an event time before which it expects no more
// data. docs/watermarks.md describes the design; this package is its core.
//
// # Values
//
// A watermark is a [time.Time] in whole milliseconds. [None] (-1 ms after the
// Unix epoch, the value of Numaflow's requests) stands for no watermark yet;
// test for it with [IsNone].
//
// # Sources
//
// A [Source] turns the event times one source processor reads, per partition
// or reader ([Source.Observe]), into the processor's watermark
// ([Source.Watermark]): the smallest event time it will still read, less
// Config.MaxDelay, never decreasing. With Config.IdleSource, a partition that
// reads nothing for Threshold moves forward by IncrementBy every
// StepInterval, never past the clock's now less MaxDelay.
//
// # Publishing
//
// A [Publisher] writes one processor's watermark per partition of the edge
// it writes to, as an [Entry] with a heartbeat, to the edge's [Store]:
// [MemStore] within one process, jsstore's JetStream key-value bucket across
// processes. What it writes for a partition never decreases, also across a
// restart, and [Publisher.Run] keeps the heartbeats fresh.
//
// # Fetching
//
// A [Fetcher] is a vertex's watermark: the smallest watermark of the live
// processors on the partitions it reads, over the stores of the edges it
// reads; it never decreases. A processor whose heartbeat is older than the
// timeout is dropped from the minimum; one that has never published holds
// nothing back.
//
// # Time
//
// Every type reads the time from the clock given with [WithClock], never
// behind the caller's back: tests drive pkg/clock's manual clock and never
// sleep.
package watermark
