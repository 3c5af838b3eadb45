// Package wire holds the conversions between the SDK's Go values and the
// generated protocol messages that every SDK package shares.
package wire

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// Time converts a protocol timestamp to a time.Time. An absent timestamp
// becomes the zero time.Time, so that absence survives a round trip through
// Timestamp.
func Time(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

// Timestamp converts a time.Time to a protocol timestamp; the zero time
// becomes an absent timestamp.
func Timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
