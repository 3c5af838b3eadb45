// Package wal is the write-ahead log of a reduce vertex: what it reads is
// appended here, and synced, before it is acked upstream, so that a vertex
// killed mid-window replays its open windows on restart and emits exactly
// the results it would have emitted without the crash.
//
// # Records and segments
//
// A [Log] is a directory of segment files, named by their number
// (00000000000000000001.wal, ...). A record is its length, a CRC-32C of its
// bytes, and its bytes; [Log.Append] writes one to the newest segment and
// starts a new segment once that one passes [Options.SegmentSize].
// [Log.Sync] makes what was appended durable; a caller acks upstream only
// after it returns.
//
// # Replay and removal
//
// [Open] finds the segments a previous run left, and [Log.Replay] reads
// their records in order. A record cut short at the end of the last segment
// (the process died while writing it) was never synced, so never acked: it
// is dropped and the segment truncated before it. A record whose CRC does
// not match anywhere else is corruption, and Replay fails with a
// [*CorruptError] naming the segment and offset.
//
// The caller knows when every window a segment's records belong to has
// written its results; it then removes the segment with [Log.Remove]. A
// segment's [Segment.Last] is the caller's own mark of the latest window
// its records reach, kept in memory for that choice. An accumulator
// removes a segment once every message in it is done (package reduce).
//
// A Log is not safe for concurrent use: one reader of a vertex owns it.
package wal
