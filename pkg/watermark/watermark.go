package watermark

import "time"

// noneTime is -1 ms after the Unix epoch: the watermark of Numaflow's
// requests when there is none.
var noneTime = time.UnixMilli(-1).UTC()

// None returns the watermark of a processor or vertex that has none yet:
// -1 ms after the Unix epoch, the value a UDF request carries for "no
// watermark". Compare with [IsNone], not ==.
func None() time.Time { return noneTime }

// IsNone reports whether t is the instant [None] stands for, in any location.
func IsNone(t time.Time) bool { return t.Equal(noneTime) }

// Millis returns t in whole milliseconds, rounded down, in UTC: the precision
// in which watermarks travel. [Publisher] publishes watermarks in it, so every
// [Store] returns what it was given.
func Millis(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

// Entry is what a processor publishes for one partition it writes to: its
// watermark, the offset in the partition it holds from, and the time of its
// last heartbeat; times are on the processor's clock and in whole
// milliseconds.
type Entry struct {
	// Processor names the publishing replica, e.g. its pod name; see
	// [ValidProcessor].
	Processor string
	// Partition is the partition of the edge's buffer the entry is for.
	Partition int32
	// Watermark is the processor's watermark for the partition, never [None]
	// in a stored entry.
	Watermark time.Time
	// Offset is at or after the offset of everything the processor had
	// written to the partition when it published Watermark: what it writes
	// after Offset is no older than Watermark.
	Offset int64
	// Heartbeat is when the processor last said it is alive.
	Heartbeat time.Time
}

// ValidProcessor reports whether name can name a processor: one or more of
// the letters a-z and A-Z, the digits, '-', '_', '=', '/' and '.', neither
// starting nor ending with '.' and with no two dots in a row. Pod names are
// valid; every [Store] can hold them as keys.
func ValidProcessor(name string) bool {
	if name == "" || name[0] == '.' || name[len(name)-1] == '.' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-', c == '_', c == '=', c == '/':
		case c == '.':
			if name[i-1] == '.' {
				return false
			}
		default:
			return false
		}
	}
	return true
}
